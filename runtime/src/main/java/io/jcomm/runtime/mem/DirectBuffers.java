package io.jcomm.runtime.mem;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;

/**
 * What the JDK does not offer for direct buffers, through the access the SDK's JVM flags open
 * ({@code --add-opens java.base/java.nio}) and the exported {@code jdk.unsupported} module: freeing one at
 * once, reading its address, and making a buffer over memory that another buffer owns, whose derived views
 * refer to it rather than to the owner. Each is looked up once; where the JVM refuses, {@link #available()}
 * (or {@link #free}'s quiet no-op) says so and callers fall back to the JDK's own allocation.
 */
public final class DirectBuffers {

    private DirectBuffers() {
    }

    /**
     * {@code Unsafe.invokeCleaner}, looked up at the first {@link #free} (a group's close), not when a process
     * starts: binding it spins a method-handle class at run time, a cost of every rank's start.
     */
    private static final class Cleaner {
        static final MethodHandle INVOKE_CLEANER = findCleaner();
    }

    private static final class Handles {
        static final Field ADDRESS = findAddress();
        static final MethodHandle RAW_BUFFER = findRawConstructor();
    }

    /** Whether {@link #address} and {@link #over} work in this JVM. */
    public static boolean available() {
        return Handles.ADDRESS != null && Handles.RAW_BUFFER != null;
    }

    /**
     * Frees a buffer made by {@link ByteBuffer#allocateDirect} or a mapping at once
     * ({@code sun.misc.Unsafe.invokeCleaner}); without that, it goes when the buffer is collected. The caller
     * guarantees that nothing touches the buffer, or a view of it, afterwards.
     */
    public static void free(ByteBuffer root) {
        if (root == null || Cleaner.INVOKE_CLEANER == null) {
            return;
        }
        try {
            Cleaner.INVOKE_CLEANER.invokeExact(root);
        } catch (Throwable t) { // best effort: the GC frees it otherwise
            // ignored
        }
    }

    /** The address of a direct buffer's element 0. */
    public static long address(ByteBuffer direct) {
        try {
            return Handles.ADDRESS.getLong(direct);
        } catch (IllegalAccessException | RuntimeException e) {
            throw new IllegalStateException("cannot read a direct buffer's address", e);
        }
    }

    /**
     * A new direct buffer over {@code bytes} bytes at {@code address} ({@code DirectByteBuffer(long, int)}, the
     * constructor of JNI's {@code NewDirectByteBuffer}): it frees nothing, and views derived from it (slices,
     * duplicates) refer to it, so that it stays reachable as long as any of them is. The memory must outlive
     * it.
     */
    public static ByteBuffer over(long address, int bytes) {
        try {
            return (ByteBuffer) Handles.RAW_BUFFER.invokeExact(address, bytes);
        } catch (Throwable e) {
            throw new IllegalStateException("cannot make a direct buffer over given memory", e);
        }
    }

    private static MethodHandle findCleaner() {
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

    private static Field findAddress() {
        try {
            Field f = java.nio.Buffer.class.getDeclaredField("address");
            f.setAccessible(true);
            return f;
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    /** {@code (long address, int bytes) -> ByteBuffer}; the constructor takes (long, int) up to JDK 20, (long, long) from 21. */
    private static MethodHandle findRawConstructor() {
        for (Class<?> capacity : new Class<?>[] {int.class, long.class}) {
            try {
                Constructor<?> k = Class.forName("java.nio.DirectByteBuffer").getDeclaredConstructor(long.class, capacity);
                k.setAccessible(true);
                return MethodHandles.lookup().unreflectConstructor(k)
                        .asType(MethodType.methodType(ByteBuffer.class, long.class, int.class));
            } catch (ReflectiveOperationException | RuntimeException e) {
                // the other one, or none
            }
        }
        return null;
    }
}
