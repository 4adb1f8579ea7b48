package io.jcomm.parallel.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.jcomm.api.DType;
import io.jcomm.api.ReduceOp;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** How mismatch messages show the calls (the exchanges themselves: DeviceCollectiveMismatchTest). */
class CollectiveFingerprintTest {

    /** A fingerprint of {@code op} with nothing set (no dtype, reduce op, dimension or root). */
    private static long[] empty(CollectiveFingerprint.Op op, long seq) {
        long[] f = new long[CollectiveFingerprint.LONGS];
        Arrays.fill(f, 0L);
        f[0] = op.ordinal();
        f[1] = -1;
        f[2] = -1;
        f[3] = -1;
        f[4] = -1;
        f[5] = seq;
        return f;
    }

    @Test
    void callsAreShownWithWhatTheyCarry() {
        long[] f = empty(CollectiveFingerprint.Op.ALL_REDUCE, 17);
        f[1] = DType.F32.ordinal();
        f[2] = ReduceOp.SUM.ordinal();
        f[6] = 2;
        f[7] = 4096;
        f[8] = 4;
        f[9] = 1024;
        assertEquals("allReduce(f32 [4, 1024], SUM) #17", CollectiveFingerprint.describe(f, null));

        long[] d = empty(CollectiveFingerprint.Op.BROADCAST_TENSOR_DICT, 5);
        d[4] = 2;
        assertEquals("broadcastTensorDict(src 2) #5", CollectiveFingerprint.describe(d, null));

        long[] m = empty(CollectiveFingerprint.Op.TENSOR_DICT_METADATA, 6);
        m[4] = 0;
        m[7] = 812;
        m[8] = 3;
        m[9] = 2;
        m[15] = 0x1f2e3d4c;
        assertEquals("broadcastTensorDict metadata(3 entries, 2 tensors, 812 bytes, hash 1f2e3d4c, src 0) #6",
                CollectiveFingerprint.describe(m, null));

        long[] s = empty(CollectiveFingerprint.Op.SEND, 3);
        s[1] = DType.BF16.ordinal();
        s[4] = 1;
        s[6] = 1;
        s[7] = 8;
        s[8] = 8;
        s[16] = 0x54440001;
        assertEquals("send(bf16 [8], dst 1, tag 0x54440001) #3", CollectiveFingerprint.describe(s, null));
        long[] r = s.clone();
        r[0] = CollectiveFingerprint.Op.RECV.ordinal();
        r[16] = 0;
        assertEquals("recv(bf16 [8], src 1) #3", CollectiveFingerprint.describe(r, new long[] {8}));
    }
}
