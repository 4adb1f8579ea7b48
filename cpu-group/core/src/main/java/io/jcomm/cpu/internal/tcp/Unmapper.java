package io.jcomm.cpu.internal.tcp;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;

/**
 * Releases a file mapping at once ({@code sun.misc.Unsafe.invokeCleaner}, looked up reflectively
 * from the exported {@code jdk.unsupported} module); without it the mapping goes when the buffer is
 * garbage collected. The caller guarantees that nothing touches the buffer afterwards.
 */
final class Unmapper {

    private static final MethodHandle INVOKE_CLEANER = find();

    private Unmapper() {
    }

    private static MethodHandle find() {
        try {
            Class<?> c = Class.forName("sun.misc.Unsafe");
            Field f = c.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            Object unsafe = f.get(null);
            return MethodHandles.lookup().findVirtual(c, "invokeCleaner", MethodType.methodType(void.class, ByteBuffer.class))
                    .bindTo(unsafe);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    static void unmap(MappedByteBuffer m) {
        if (INVOKE_CLEANER == null) {
            return;
        }
        try {
            INVOKE_CLEANER.invokeExact((ByteBuffer) m);
        } catch (Throwable t) { // best effort: the GC releases the mapping otherwise
            // ignored
        }
    }
}
