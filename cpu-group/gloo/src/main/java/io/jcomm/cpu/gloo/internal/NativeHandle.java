package io.jcomm.cpu.gloo.internal;

import java.util.concurrent.TimeUnit;

/**
 * Owns a native communicator handle and guarantees that it is freed exactly once and never while
 * a call uses it: every native call runs under a {@link #acquire() lease}; {@link #close} aborts
 * the communicator (which makes a call in progress fail promptly), and the handle is destroyed by
 * whoever releases the last lease after close. A close from another thread therefore can neither
 * free memory under a running call nor block for longer than it chooses to wait.
 *
 * <p>Thread safe.
 */
public final class NativeHandle {

    /** A lease on the handle; {@link #close()} releases it. */
    public final class Lease implements AutoCloseable {
        private boolean released;

        private Lease() {
        }

        /** The raw handle, valid until this lease is released. */
        public long handle() {
            return handle;
        }

        @Override
        public void close() {
            if (!released) {
                released = true;
                release();
            }
        }
    }

    private final long handle;
    private int users;
    private boolean closed;
    private boolean destroyed;

    public NativeHandle(long handle) {
        if (handle == 0) {
            throw new IllegalArgumentException("null native handle");
        }
        this.handle = handle;
    }

    /**
     * A lease on the live handle, or {@code null} when the handle was closed.
     */
    public synchronized Lease acquire() {
        if (closed) {
            return null;
        }
        users++;
        return new Lease();
    }

    private void release() {
        boolean destroyNow;
        synchronized (this) {
            users--;
            destroyNow = closed && users == 0 && !destroyed;
            if (destroyNow) {
                destroyed = true;
            }
        }
        if (destroyNow) {
            GlooNative.destroy(handle);
            synchronized (this) {
                notifyAll();
            }
        }
    }

    public synchronized boolean isClosed() {
        return closed;
    }

    /**
     * Closes the handle: aborts the communicator (when it was connected, so that a call in
     * progress fails; with {@code goodbye} the peers are told it is a clean close), then destroys it now if no call uses it, or else waits up to {@code wait}
     * for the last call to end (that call destroys it). Idempotent.
     *
     * @return true if the handle is destroyed when this returns
     */
    public boolean close(boolean goodbye, long wait, TimeUnit unit) {
        synchronized (this) {
            if (closed) {
                return awaitDestroyed(wait, unit);
            }
            closed = true;
            users++; // the abort below is itself a use
        }
        try {
            GlooNative.abort(handle, goodbye);
        } catch (GlooNativeException e) {
            // abort of a half-connected communicator: nothing left to wake up
        } finally {
            release();
        }
        synchronized (this) {
            return awaitDestroyed(wait, unit);
        }
    }

    private synchronized boolean awaitDestroyed(long wait, TimeUnit unit) {
        long end = System.nanoTime() + unit.toNanos(wait);
        while (!destroyed) {
            long left = end - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            try {
                TimeUnit.NANOSECONDS.timedWait(this, left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return destroyed;
            }
        }
        return true;
    }
}
