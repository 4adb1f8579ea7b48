package io.jcomm.api.device;

import io.jcomm.api.Tensor;
import java.nio.ByteBuffer;

/**
 * Copies between a provider's device memory and host memory, for engines that stage device buffers
 * through host memory (the one-sided transfer engine registers device tensors this way). Offered by a
 * {@link DeviceCommunicatorProvider} that supports it ({@link DeviceCommunicatorProvider#deviceMemory()}).
 *
 * <p>Both copies are synchronous: they return once the bytes are in place. Offsets and lengths are in
 * bytes; a range outside the tensor fails with {@link IllegalArgumentException} before anything is
 * copied, and a library error with {@link io.jcomm.api.BackendException}. Thread safe.
 */
public interface DeviceMemory {

    /** Copies {@code dst.remaining()} bytes of {@code device} from byte {@code offset} into {@code dst} (a direct buffer), advancing its position. */
    void copyToHost(Tensor device, long offset, ByteBuffer dst);

    /** Copies {@code src.remaining()} bytes of {@code src} (a direct buffer) into {@code device} at byte {@code offset}, advancing its position. */
    void copyFromHost(ByteBuffer src, Tensor device, long offset);

    /** Checks that {@code [offset, offset + length)} lies within {@code device}'s bytes and that the host buffer is direct. */
    static void checkRange(Tensor device, long offset, ByteBuffer host) {
        long length = host.remaining();
        if (!host.isDirect()) {
            throw new IllegalArgumentException("device copies need a direct host buffer");
        }
        if (offset < 0 || offset > device.byteSize() - length) {
            throw new IllegalArgumentException("[" + offset + ", +" + length + ") outside the " + device.byteSize()
                    + " bytes of " + device);
        }
    }
}
