package io.jcomm.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.UnsupportedByBackendException;
import io.jcomm.api.device.P2POp;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The batchP2P form of allToAll/allToAllV in {@link AbstractDeviceCommunicator}, without a peer. */
class AbstractDeviceCommunicatorAllToAllTest {

    /** Records the batch it is given; {@code refuse} makes batchP2P the interface's default refusal. */
    static final class Recording extends AbstractDeviceCommunicator {
        final List<List<P2POp>> batches = new ArrayList<>();
        final boolean refuse;

        Recording(int rank, int worldSize, boolean refuse) {
            super("vendor:x", "ep:0", rank, worldSize, Device.CPU);
            this.refuse = refuse;
        }

        @Override
        public void batchP2P(List<P2POp> ops, StreamHandle stream) {
            if (refuse) {
                throw unsupported("batchP2P");
            }
            batches.add(ops);
        }

        @Override public void synchronize(StreamHandle stream) { }
        @Override public void abort() { }
        @Override public void close() { }
    }

    @Test
    void oneBatchWithARecvAndASendPerPeerSkippingZeroCounts() {
        Recording c = new Recording(1, 3, false);
        Tensor in = Tensor.allocate(DType.I32, 6);
        Tensor out = Tensor.allocate(DType.I32, 5);
        for (int i = 0; i < 6; i++) {
            in.setLong(i, i);
        }
        // send 2 to rank 0, 0 to self, 4 to rank 2; receive 5 from rank 0, 0 from self, 0 from rank 2
        c.allToAllV(out, in, new long[] {5, 0, 0}, new long[] {2, 0, 4}, StreamHandle.HOST);
        assertEquals(1, c.batches.size());
        List<P2POp> ops = c.batches.get(0);
        assertEquals(3, ops.size());
        assertEquals(P2POp.Kind.RECV, ops.get(0).kind());
        assertEquals(0, ops.get(0).peer());
        assertEquals(5, ops.get(0).tensor().numel());
        assertEquals(P2POp.Kind.SEND, ops.get(1).kind());
        assertEquals(0, ops.get(1).peer());
        assertEquals(0, ops.get(1).tensor().getLong(0));
        assertEquals(2, ops.get(1).tensor().numel());
        assertEquals(P2POp.Kind.SEND, ops.get(2).kind());
        assertEquals(2, ops.get(2).peer());
        assertEquals(2, ops.get(2).tensor().getLong(0));
        assertEquals(4, ops.get(2).tensor().numel());
    }

    @Test
    void equalSplitsIncludeTheSelfPair() {
        Recording c = new Recording(0, 2, false);
        c.allToAll(Tensor.allocate(DType.F32, 4), Tensor.allocate(DType.F32, 4), StreamHandle.HOST);
        List<P2POp> ops = c.batches.get(0);
        assertEquals(4, ops.size());
        assertEquals(0, ops.get(0).peer());
        assertEquals(0, ops.get(1).peer());
        assertEquals(2, ops.get(3).tensor().numel());
    }

    @Test
    void badArgumentsFailBeforeTheBatchAndWithoutBatchP2PItIsRefusedByItsOwnName() {
        Recording c = new Recording(0, 2, false);
        assertThrows(IllegalArgumentException.class,
                () -> c.allToAll(Tensor.allocate(DType.F32, 3), Tensor.allocate(DType.F32, 3), StreamHandle.HOST));
        assertEquals(0, c.batches.size());
        Recording none = new Recording(0, 2, true);
        UnsupportedByBackendException e = assertThrows(UnsupportedByBackendException.class,
                () -> none.allToAllV(Tensor.allocate(DType.F32, 2), Tensor.allocate(DType.F32, 2), new long[] {1, 1},
                        new long[] {1, 1}, StreamHandle.HOST));
        assertEquals("allToAllV", e.unsupportedOperation());
        assertFalse(none.isClosed());
    }
}
