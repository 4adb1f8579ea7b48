package io.jcomm.cpu.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.Deadline;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.UnsupportedByBackendException;
import io.jcomm.api.work.Work;
import io.jcomm.cpu.codec.ForyCodec;
import io.jcomm.cpu.spi.CpuBackend;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A backend that implements only {@code name}, {@code barrier} and {@code close} compiles (every other
 * operation defaults to {@link CpuBackend#unsupported}); the group turns a refused operation into a
 * typed error naming backend, group, rank and operation, and stays usable.
 */
class UnsupportedByBackendTest {

    /** The smallest backend there can be. */
    static final class BarrierOnly implements CpuBackend {
        int barriers;
        boolean closed;

        @Override
        public String name() {
            return "barrier-only";
        }

        @Override
        public void barrier(Deadline deadline) {
            barriers++;
        }

        @Override
        public void close() {
            closed = true;
        }
    }

    @Test
    void aRefusedOperationIsTypedAndLeavesTheGroupUsable() {
        BarrierOnly backend = new BarrierOnly();
        DefaultProcessGroup g = new DefaultProcessGroup("g", 1, 2, List.of(0, 1), backend.name(), Duration.ofSeconds(5),
                ForyCodec.builder().build(), 1 << 20, backend);
        UnsupportedByBackendException e = assertThrows(UnsupportedByBackendException.class,
                () -> g.allReduce(Tensor.ofFloats(1, 2), ReduceOp.SUM));
        assertEquals("barrier-only", e.backend());
        assertEquals("allReduce", e.unsupportedOperation());
        assertEquals("g", e.group());
        assertEquals(1, e.rank());
        assertTrue(e.getMessage().contains("allReduce is not supported by backend barrier-only"), e.getMessage());

        Work<Void> w = g.allGatherAsync(Tensor.allocate(io.jcomm.api.DType.F32, 4), Tensor.ofFloats(1, 2),
                Duration.ofSeconds(5));
        UnsupportedByBackendException async = assertThrows(UnsupportedByBackendException.class, w::await);
        assertEquals("allGather", async.unsupportedOperation());

        g.barrier(); // not poisoned: nothing was sent
        assertEquals(1, backend.barriers);
        assertFalse(backend.closed);
        g.close();
        assertTrue(backend.closed);
    }
}
