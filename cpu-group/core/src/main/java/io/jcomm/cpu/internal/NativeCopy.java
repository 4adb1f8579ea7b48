package io.jcomm.cpu.internal;

import io.jcomm.api.config.Settings;
import io.jcomm.api.Availability;
import java.io.IOException;
import java.nio.BufferOverflowException;
import java.nio.ByteBuffer;
import java.nio.ReadOnlyBufferException;

/**
 * Copies between direct buffers with the CPU's string copy ({@code rep movsb}, in {@code libjcommcopy.so})
 * instead of Java's 8- to 64-byte stores: writing a block into shared memory whose cache lines another
 * core read last is 5-6x faster that way on the machines measured (docs/PERFORMANCE.md). The tcp
 * backend's shared-memory paths copy through {@link #put}; the library is optional, and without it
 * (another platform, no C compiler at build time, {@code tcp.shm.nativeCopy=false}) they copy with Java.
 *
 * <p>Native code only ever sees ranges this class checked: both buffers direct, each range within its
 * buffer's position and limit. The shared-memory files are created 0600 with every page allocated up
 * front and never shrunk; were another process of the same user to truncate one under a copy, the
 * fault (SIGBUS) in native code would end the JVM, where Java's copy throws an {@code InternalError}.
 * Thread safe (stateless after loading).
 */
public final class NativeCopy {

    /**
     * Below this many bytes {@link #put} copies with Java: a JNI call costs about as much as Java's copy of
     * a few hundred bytes, and small writes touch few lines.
     */
    public static final int MIN_BYTES = 1024;

    private NativeCopy() {
    }

    private static final class Lib {
        static final Availability VALUE = load();
        static final boolean LOADED = VALUE.available();
    }

    private static Availability load() {
        try {
            String where = BundledLibrary.load(NativeCopy.class, "jcommcopy", Settings.COPY_LIBRARY);
            if (probe0() != 1) {
                return Availability.unavailable("libjcommcopy.so answered its probe wrongly (" + where + ")");
            }
            return Availability.available("rep movsb via JNI (" + where + ")");
        } catch (BundledLibrary.Missing e) {
            return Availability.unavailable(e.getMessage());
        } catch (UnsatisfiedLinkError | IOException | RuntimeException e) {
            return Availability.unavailable("could not load libjcommcopy.so: " + e);
        }
    }

    /** Whether the native copy is loaded, and why (not). Loads it on first call; never throws. */
    public static Availability availability() {
        return Lib.VALUE;
    }

    /**
     * {@code dst.put(src)}: copies {@code src}'s remaining bytes to {@code dst} at its position and
     * advances both positions, natively when {@code allowNative}, the library is loaded, both buffers
     * are direct and the copy has at least {@link #MIN_BYTES}; with Java otherwise.
     *
     * @return {@code dst}
     * @throws BufferOverflowException if {@code dst} has less room than {@code src} has bytes
     * @throws ReadOnlyBufferException if {@code dst} is read-only
     */
    public static ByteBuffer put(ByteBuffer dst, ByteBuffer src, boolean allowNative) {
        return put(dst, src, allowNative, false);
    }

    /**
     * {@link #put}, but with stores that bypass the caches (non-temporal): for copies of megabytes into a
     * destination that no core reads soon (the own part of a large all-to-all), where it saves reading each
     * destination line from memory before writing it. Falls back to {@link #put} as that does.
     *
     * @return {@code dst}
     */
    public static ByteBuffer stream(ByteBuffer dst, ByteBuffer src, boolean allowNative) {
        return put(dst, src, allowNative, true);
    }

    private static ByteBuffer put(ByteBuffer dst, ByteBuffer src, boolean allowNative, boolean stream) {
        int n = src.remaining();
        if (!allowNative || n < MIN_BYTES || !dst.isDirect() || !src.isDirect() || !Lib.LOADED) {
            return dst.put(src);
        }
        if (dst.isReadOnly()) {
            throw new ReadOnlyBufferException();
        }
        if (n > dst.remaining()) {
            throw new BufferOverflowException();
        }
        int d = dst.position();
        int s = src.position();
        if (!copy0(dst, d, src, s, n, stream)) {
            throw new IllegalStateException("native copy refused a direct buffer");
        }
        dst.position(d + n);
        src.position(s + n);
        return dst;
    }

    /**
     * Reads {@code n} bytes at address {@code remote} of process {@code pid} into {@code dst} at its position
     * (not moved) with one kernel copy ({@code process_vm_readv}). The caller vouches for {@code remote}: an
     * address a member of its group published for this read (a wrong one fails with EFAULT, it cannot write
     * outside {@code dst}).
     *
     * @return 0 when all bytes were read, else the (positive) errno: EPERM where ptrace is restricted (Yama,
     *         a container's seccomp filter), ENOSYS without the call, EFAULT for an address not mapped there,
     *         and -1 when the library is not loaded or the range does not fit {@code dst}
     */
    public static int readPeer(int pid, long remote, ByteBuffer dst, long n) {
        if (!Lib.LOADED || !dst.isDirect() || dst.isReadOnly() || n < 0 || n > dst.remaining()) {
            return -1;
        }
        long r = readPeer0(pid, remote, dst, dst.position(), n);
        return r == n ? 0 : r < 0 ? (int) -r : -1;
    }

    private static native int probe0();

    private static native long readPeer0(int pid, long remote, ByteBuffer dst, long dstOff, long n);

    /** Copies with the string copy, or with non-temporal stores when {@code stream}. */
    private static native boolean copy0(ByteBuffer dst, long dstOff, ByteBuffer src, long srcOff, long n,
                                        boolean stream);
}
