package io.jcomm.cpu.store.internal;

import io.jcomm.api.Deadline;
import java.io.EOFException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.CancelledKeyException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One client connection: a non-blocking {@link SocketChannel} (TCP_NODELAY) with a private selector,
 * driven by the calling thread. Requests are encoded into one reusable direct buffer and written
 * with as few syscalls as possible; replies are read into another reusable direct buffer. Not thread
 * safe: the owner serialises requests; only {@link #abort()} may be called from another thread.
 *
 * <p>Every read and write is bounded by a {@link Deadline}: {@link TimeoutSignal} when it passes,
 * {@link IOException} when the connection fails, {@link AbortedSignal} after {@link #abort()}.
 *
 * <p>A connection may carry a final message ({@link #armGoodbye}): {@link #close()} and
 * {@link #abort()} write it first (once, best effort, within {@link #GOODBYE_GRACE_NANOS}), never in
 * the middle of another request's bytes.
 */
public final class ClientChannel implements AutoCloseable {

    private static final int INITIAL_BUFFER = 64 * 1024;
    private static final int RETAINED_BUFFER = 1024 * 1024;
    /** Longest time {@link #close()} / {@link #abort()} spend on the goodbye. */
    public static final long GOODBYE_GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

    /** The deadline passed while waiting for the peer. */
    public static final class TimeoutSignal extends Exception {
        private static final long serialVersionUID = 1L;

        TimeoutSignal() {
            super("deadline passed", null, false, false);
        }
    }

    /** The connection was aborted from another thread (store closed). */
    public static final class AbortedSignal extends IOException {
        private static final long serialVersionUID = 1L;

        AbortedSignal() {
            super("connection aborted (store closed)");
        }
    }

    private final SocketChannel ch;
    private final Selector selector;
    private final SelectionKey key;
    private final String peer;
    private ByteBuffer out;
    private ByteBuffer in;
    /** Read index into {@link #in}; bytes [rpos, in.position()) are received and unread. */
    private int rpos;
    private volatile boolean aborted;
    /** Held while request bytes are written, so that a goodbye never lands inside a request. */
    private final ReentrantLock writeLock = new ReentrantLock();
    private final AtomicReference<byte[]> goodbye = new AtomicReference<>();

    private ClientChannel(SocketChannel ch, Selector selector, SelectionKey key, String peer) {
        this.ch = ch;
        this.selector = selector;
        this.key = key;
        this.peer = peer;
        this.out = ByteBuffer.allocateDirect(INITIAL_BUFFER).order(ByteOrder.LITTLE_ENDIAN);
        this.in = ByteBuffer.allocateDirect(INITIAL_BUFFER).order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * Connects (one attempt) within the deadline.
     *
     * @throws IOException    refused, unreachable, reset
     * @throws TimeoutSignal  the deadline passed
     */
    public static ClientChannel connect(InetSocketAddress address, Deadline deadline) throws IOException, TimeoutSignal {
        SocketChannel ch = SocketChannel.open();
        Selector sel = null;
        try {
            ch.configureBlocking(false);
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            ch.setOption(StandardSocketOptions.SO_KEEPALIVE, true);
            sel = Selector.open();
            SelectionKey k = ch.register(sel, SelectionKey.OP_CONNECT);
            if (!ch.connect(address)) {
                while (!ch.finishConnect()) {
                    long ms = deadline.remainingMillis();
                    if (ms <= 0) {
                        throw new TimeoutSignal();
                    }
                    sel.select(ms);
                    sel.selectedKeys().clear();
                }
            }
            k.interestOps(SelectionKey.OP_READ);
            return new ClientChannel(ch, sel, k, address.toString());
        } catch (IOException | TimeoutSignal | RuntimeException e) {
            ch.close();
            if (sel != null) {
                sel.close();
            }
            throw e;
        }
    }

    public String peer() {
        return peer;
    }

    // ------------------------------------------------------------------ encoding

    /** Starts a new request (discards anything encoded and not sent). */
    public ClientChannel begin() {
        out.clear();
        return this;
    }

    private void ensure(int n) {
        if (out.remaining() < n) {
            int need = out.position() + n;
            int cap = Math.max(need, out.capacity() * 2);
            ByteBuffer nb = ByteBuffer.allocateDirect(cap).order(ByteOrder.LITTLE_ENDIAN);
            out.flip();
            nb.put(out);
            out = nb;
        }
    }

    public ClientChannel u8(int v) {
        ensure(1);
        out.put((byte) v);
        return this;
    }

    public ClientChannel u32(int v) {
        ensure(4);
        out.putInt(v);
        return this;
    }

    public ClientChannel i64(long v) {
        ensure(8);
        out.putLong(v);
        return this;
    }

    /** A length-prefixed byte string. */
    public ClientChannel bytes(byte[] v) {
        ensure(8 + v.length);
        out.putLong(v.length);
        out.put(v);
        return this;
    }

    public ClientChannel raw(byte[] v) {
        ensure(v.length);
        out.put(v);
        return this;
    }

    /**
     * A length-prefixed key {@code prefix + key} in UTF-8 (ASCII fast path, no intermediate string).
     *
     * @return the encoded length in bytes (the caller checks it against its limit)
     */
    public int key(char prefix, String key) {
        int n = key.length();
        ensure(8 + 1 + 3 * n);
        int lenPos = out.position();
        out.position(lenPos + 8);
        int start = out.position();
        out.put((byte) prefix);
        boolean ascii = true;
        for (int i = 0; i < n; i++) {
            char c = key.charAt(i);
            if (c >= 0x80) {
                ascii = false;
                break;
            }
            out.put((byte) c);
        }
        if (!ascii) {
            out.position(start + 1);
            byte[] b = key.getBytes(StandardCharsets.UTF_8);
            ensure(b.length);
            out.put(b);
        }
        int len = out.position() - start;
        out.putLong(lenPos, len);
        return len;
    }

    /** Bytes encoded so far in the current request. */
    public int pending() {
        return out.position();
    }

    /**
     * Sends the encoded request.
     *
     * @throws IOException   connection failed
     * @throws TimeoutSignal the socket did not take the bytes before the deadline
     */
    public void send(Deadline deadline) throws IOException, TimeoutSignal {
        out.flip();
        writeLock.lock();
        try {
            while (out.hasRemaining()) {
                int n = ch.write(out);
                if (n == 0) {
                    await(SelectionKey.OP_WRITE, deadline);
                }
            }
        } finally {
            writeLock.unlock();
            if (out.capacity() > RETAINED_BUFFER) {
                out = ByteBuffer.allocateDirect(INITIAL_BUFFER).order(ByteOrder.LITTLE_ENDIAN);
            } else {
                out.clear();
            }
        }
    }

    // ------------------------------------------------------------------ decoding

    private void await(int ops, Deadline deadline) throws IOException, TimeoutSignal {
        if (aborted) {
            throw new AbortedSignal();
        }
        long ms = deadline.remainingMillis();
        if (ms <= 0) {
            throw new TimeoutSignal();
        }
        try {
            if (key.interestOps() != ops) {
                key.interestOps(ops);
            }
            selector.select(ClientChannel::ignore, ms);
        } catch (ClosedSelectorException | CancelledKeyException e) {
            // closed by another thread (abort) between the check above and here
            throw closedUnderTheCall(e);
        }
        if (aborted) {
            throw new AbortedSignal();
        }
        if (Thread.currentThread().isInterrupted()) {
            throw new java.io.InterruptedIOException("interrupted while waiting for the store server");
        }
        if (ops != SelectionKey.OP_READ) {
            try {
                key.interestOps(SelectionKey.OP_READ);
            } catch (CancelledKeyException e) {
                throw closedUnderTheCall(e);
            }
        }
    }

    /** The channel or selector was closed under a call: the abort when it was one, else a lost connection. */
    private IOException closedUnderTheCall(RuntimeException e) {
        return aborted ? new AbortedSignal() : new IOException("the connection was closed", e);
    }

    private static void ignore(SelectionKey k) {
        // readiness is rechecked by the read/write that follows
    }

    private int available() {
        return in.position() - rpos;
    }

    /** Ensures {@code n <= in.capacity()} unread bytes are buffered. */
    private void fill(int n, Deadline deadline) throws IOException, TimeoutSignal {
        if (available() >= n) {
            return;
        }
        if (in.capacity() - rpos < n) {
            in.limit(in.position()).position(rpos);
            if (in.capacity() >= n) {
                in.compact(); // unread bytes to the front; position = their count, limit = capacity
            } else {
                ByteBuffer nb = ByteBuffer.allocateDirect(Math.max(n, in.capacity() * 2)).order(ByteOrder.LITTLE_ENDIAN);
                nb.put(in);
                in = nb;
            }
            rpos = 0;
        }
        while (available() < n) {
            int r = ch.read(in);
            if (r < 0) {
                throw new EOFException("connection closed by the store server " + peer);
            }
            if (r == 0) {
                await(SelectionKey.OP_READ, deadline);
            }
        }
    }

    public int readU8(Deadline deadline) throws IOException, TimeoutSignal {
        fill(1, deadline);
        return in.get(rpos++) & 0xFF;
    }

    public int readU32(Deadline deadline) throws IOException, TimeoutSignal {
        fill(4, deadline);
        int v = in.getInt(rpos);
        rpos += 4;
        return v;
    }

    public long readI64(Deadline deadline) throws IOException, TimeoutSignal {
        fill(8, deadline);
        long v = in.getLong(rpos);
        rpos += 8;
        return v;
    }

    /** Reads {@code n} raw bytes. */
    public byte[] readRaw(int n, Deadline deadline) throws IOException, TimeoutSignal {
        byte[] b = new byte[n];
        readInto(b, deadline);
        return b;
    }

    /**
     * Reads a length-prefixed byte string of at most {@code max} bytes.
     *
     * @throws ReplyTooLarge when the declared length exceeds {@code max} (nothing allocated)
     */
    public byte[] readBytes(int max, Deadline deadline) throws IOException, TimeoutSignal {
        long len = readI64(deadline);
        if (len < 0 || len > max) {
            throw new ReplyTooLarge("reply of " + Long.toUnsignedString(len) + " bytes exceeds the limit " + max);
        }
        byte[] b = new byte[(int) len];
        readInto(b, deadline);
        return b;
    }

    private void readInto(byte[] b, Deadline deadline) throws IOException, TimeoutSignal {
        int n = b.length;
        if (n <= in.capacity()) {
            fill(n, deadline);
            in.get(rpos, b, 0, n);
            rpos += n;
            return;
        }
        int have = available();
        in.get(rpos, b, 0, have);
        rpos += have;
        ByteBuffer dst = ByteBuffer.wrap(b, have, n - have);
        while (dst.hasRemaining()) {
            int r = ch.read(dst);
            if (r < 0) {
                throw new EOFException("connection closed by the store server " + peer);
            }
            if (r == 0) {
                await(SelectionKey.OP_READ, deadline);
            }
        }
    }

    /** A declared reply length over the client's limit; the connection is unusable afterwards. */
    public static final class ReplyTooLarge extends IOException {
        private static final long serialVersionUID = 1L;

        ReplyTooLarge(String m) {
            super(m);
        }
    }

    /**
     * True if the connection looks usable before a new request: no unread bytes and no end-of-stream
     * (one non-blocking read). Detects a server that went away while the connection was idle, so a
     * non-idempotent request is never sent into a dead connection.
     */
    public boolean idleAndOpen() {
        if (aborted || available() > 0 || !ch.isOpen()) {
            return false;
        }
        rpos = 0;
        in.clear();
        try {
            int r = ch.read(in);
            return r == 0;
        } catch (IOException e) {
            return false;
        }
    }

    /** Discards buffered input (after a failure). */
    public void resetInput() {
        rpos = 0;
        in.clear();
    }

    /**
     * Sets the message {@link #close()} and {@link #abort()} send before closing ({@code null}: none).
     * The bytes are not copied.
     */
    public void armGoodbye(byte[] frame) {
        goodbye.set(frame);
    }

    /** Writes the armed goodbye once, best effort: never inside another request, within the grace. */
    private void sayGoodbye() {
        byte[] g = goodbye.getAndSet(null);
        if (g == null || !ch.isOpen()) {
            return;
        }
        long end = System.nanoTime() + GOODBYE_GRACE_NANOS;
        boolean locked = false;
        // an interrupted thread would close the channel on write (ClosedByInterruptException): park the flag
        boolean interrupted = Thread.interrupted();
        try {
            while (!(locked = writeLock.tryLock())) { // no lockInterruptibly: an interrupted closer still says goodbye
                if (System.nanoTime() - end > 0) {
                    return; // a request is being written (and stuck): no goodbye
                }
                LockSupport.parkNanos(100_000);
            }
            ByteBuffer b = ByteBuffer.wrap(g);
            while (b.hasRemaining()) {
                if (ch.write(b) == 0) {
                    if (System.nanoTime() - end > 0) {
                        return;
                    }
                    LockSupport.parkNanos(100_000);
                }
            }
        } catch (IOException e) {
            // the connection is already gone: nothing to say goodbye on
        } finally {
            if (locked) {
                writeLock.unlock();
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Makes a blocked call of the owner thread fail promptly; callable from any thread. Sends the
     * armed goodbye first, before the owner thread can see the abort: an owner that saw it early (on
     * its way into a wait, not yet blocked) closed the channel under the goodbye being written, and the
     * server counted a clean close as a death.
     */
    public void abort() {
        sayGoodbye();
        aborted = true;
        try {
            ch.close();
        } catch (IOException ignored) {
            // closing anyway
        }
        selector.wakeup();
    }

    /** Sends the armed goodbye (if any), then closes the connection. */
    @Override
    public void close() {
        sayGoodbye();
        try {
            ch.close();
        } catch (IOException ignored) {
            // nothing to do
        }
        try {
            selector.close();
        } catch (IOException ignored) {
            // nothing to do
        }
    }
}
