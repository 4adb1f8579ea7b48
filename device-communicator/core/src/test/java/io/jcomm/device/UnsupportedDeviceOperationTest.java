package io.jcomm.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.Device;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.UnsupportedByBackendException;
import io.jcomm.api.device.DeviceCommunicator;
import org.junit.jupiter.api.Test;

/** A provider's communicator that predates an operation keeps compiling and refuses it with a typed error. */
class UnsupportedDeviceOperationTest {

    /** Implements the lifecycle only: every data operation is the interface's default. */
    static final class LifecycleOnly implements DeviceCommunicator {
        @Override public String name() { return "vendor:x"; }
        @Override public String groupName() { return "tp:0"; }
        @Override public int rank() { return 1; }
        @Override public int worldSize() { return 2; }
        @Override public Device device() { return Device.CPU; }
        @Override public void synchronize(StreamHandle stream) { }
        @Override public boolean isClosed() { return false; }
        @Override public void abort() { }
        @Override public void close() { }
    }

    @Test
    void everyDataOperationDefaultsToATypedRefusal() {
        DeviceCommunicator c = new LifecycleOnly();
        Tensor t = Tensor.ofFloats(1, 2);
        UnsupportedByBackendException e = assertThrows(UnsupportedByBackendException.class,
                () -> c.allReduce(t, t, ReduceOp.SUM, StreamHandle.HOST));
        assertEquals("vendor:x", e.backend());
        assertEquals("allReduce", e.unsupportedOperation());
        assertEquals("tp:0", e.group());
        assertEquals(1, e.rank());
        assertTrue(e.getMessage().contains("allReduce is not supported by backend vendor:x"), e.getMessage());
        assertEquals("batchP2P", assertThrows(UnsupportedByBackendException.class,
                () -> c.batchP2P(java.util.List.of(), StreamHandle.HOST)).unsupportedOperation());
        assertEquals("broadcast", assertThrows(UnsupportedByBackendException.class,
                () -> c.broadcast(t, 0, StreamHandle.HOST)).unsupportedOperation());
        Tensor o = Tensor.ofFloats(0, 0);
        assertEquals("allToAll", assertThrows(UnsupportedByBackendException.class,
                () -> c.allToAll(o, t, StreamHandle.HOST)).unsupportedOperation());
        assertEquals("allToAllV", assertThrows(UnsupportedByBackendException.class,
                () -> c.allToAllV(o, t, new long[] {1, 1}, new long[] {1, 1}, StreamHandle.HOST)).unsupportedOperation());
    }
}
