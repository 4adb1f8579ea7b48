package io.jcomm.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DType;
import io.jcomm.api.Tensor;
import org.junit.jupiter.api.Test;

class DimLayoutTest {

    /** Rearranges rank-major -> concatenated for every dim of a few shapes and checks each element by index arithmetic. */
    @Test
    void rankMajorToConcatMatchesIndexArithmetic() {
        long[][] shapes = {{5}, {2, 3}, {3, 1, 4}, {2, 2, 2, 3}};
        for (long[] s : shapes) {
            for (int world = 1; world <= 4; world++) {
                for (int dim = 0; dim < s.length; dim++) {
                    DimLayout l = DimLayout.of(s, dim, world, DType.I32);
                    long piece = l.pieceElements();
                    Tensor rankMajor = Tensor.allocate(DType.I32, piece * world);
                    for (long i = 0; i < piece * world; i++) {
                        rankMajor.setLong(i, i); // element k of rank r has value r*piece + k
                    }
                    Tensor concat = Tensor.allocate(DType.I32, piece * world);
                    l.rankMajorToConcat(rankMajor.buffer(), concat.buffer());
                    long[] whole = s.clone();
                    whole[dim] *= world;
                    for (long flat = 0; flat < piece * world; flat++) {
                        long[] idx = new long[s.length];
                        long f = flat;
                        for (int d = s.length - 1; d >= 0; d--) {
                            idx[d] = f % whole[d];
                            f /= whole[d];
                        }
                        long r = idx[dim] / s[dim];
                        idx[dim] %= s[dim];
                        long k = 0;
                        for (int d = 0; d < s.length; d++) {
                            k = k * s[d] + idx[d];
                        }
                        assertEquals(r * piece + k, concat.getLong(flat));
                    }
                    Tensor back = Tensor.allocate(DType.I32, piece * world);
                    l.concatToRankMajor(concat.buffer(), back.buffer());
                    assertTrue(back.contentEquals(rankMajor));
                }
            }
        }
    }

    @Test
    void geometry() {
        DimLayout l = DimLayout.of(new long[] {2, 3, 4}, 1, 4, DType.F32);
        assertEquals(2, l.height());
        assertEquals(12 * 4, l.rowBytes());
        assertEquals(4 * 12 * 4, l.concatPitch());
        assertEquals(24 * 4, l.pieceBytes());
        assertEquals(2 * 24 * 4, l.rankMajorOffset(2));
        assertEquals(2 * 12 * 4, l.concatOffset(2));
        assertFalse(l.isRankMajor());
        assertTrue(DimLayout.of(new long[] {2, 3, 4}, 0, 4, DType.F32).isRankMajor());
        assertTrue(DimLayout.of(new long[] {1, 3, 4}, 1, 4, DType.F32).isRankMajor());
    }
}
