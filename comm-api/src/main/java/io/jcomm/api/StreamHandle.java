package io.jcomm.api;

/**
 * An opaque, caller-owned execution stream on a device (a {@code cudaStream_t} for CUDA, an
 * {@code aclrtStream} for Ascend). Device communicators enqueue their work on the stream the caller
 * passes and never create hidden streams, so that the calls can be captured into graphs.
 *
 * @param device the device the stream belongs to
 * @param handle the native handle; {@code 0} means the device's default stream
 */
public record StreamHandle(Device device, long handle) {

    /** The "no stream" value used for host (CPU) communicators. */
    public static final StreamHandle HOST = new StreamHandle(Device.CPU, 0L);

    public StreamHandle {
        java.util.Objects.requireNonNull(device, "device");
    }

    /** The default stream of {@code device}. */
    public static StreamHandle defaultStream(Device device) {
        return device.isCpu() ? HOST : new StreamHandle(device, 0L);
    }
}
