package io.jcomm.cpu.store;

import io.jcomm.runtime.Backoff;
import io.jcomm.runtime.TokenProof;
import io.jcomm.api.config.Settings;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.StoreException;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.store.internal.ClientChannel;
import io.jcomm.cpu.store.internal.ClientChannel.TimeoutSignal;
import io.jcomm.cpu.store.internal.Numbering;
import io.jcomm.cpu.store.internal.Op;
import io.jcomm.cpu.store.internal.Wire;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A {@link Store} client of PyTorch's TCPStore protocol: talks to a torch server
 * ({@code TCPStore(..., is_master=True)}) or to a {@link TcpStoreServer}, in the configured
 * {@link TcpStoreDialect}. Keys go on the wire as {@code "/" + key} in UTF-8, exactly as torch's
 * client sends them, so torch and jcomm processes see the same keys; {@link #add} values are decimal
 * ASCII, as torch stores them.
 *
 * <h2>Why a blocking, caller-driven socket</h2>
 * The store is a request/reply protocol with one request in flight; its latency is the round trip.
 * The calling thread therefore does the I/O itself on a non-blocking {@code SocketChannel}
 * (TCP_NODELAY) with a private selector: one write, then a read that parks in {@code epoll_wait}
 * until the reply arrives. An event-loop client (Netty) would add two thread hand-offs per request
 * (caller to loop, loop to caller), each a futex wake-up of several microseconds on a loaded
 * machine, for no gain: nothing here benefits from multiplexing. Request and reply buffers are
 * direct and reused; a {@link #get} allocates only its result.
 *
 * <h2>Round trips</h2>
 * On connecting, the client sends a harmless capability probe (a CHECK of a key no torch client can
 * produce). A jcomm server answers READY; then {@link #get} pipelines WAIT and GET in one write (one
 * round trip; torch's client needs two), {@link #multiGet} pipelines WAIT and MULTI_GET, and a legacy
 * connection is upgraded to the 2.1 command set. Against a torch server (which would fail a GET of a
 * key that is not there yet) the client waits first, then gets: the same two round trips as torch.
 *
 * <h2>What the legacy dialect lacks, and how it is emulated</h2>
 * Only against a torch 1.13/2.0 server (a jcomm server upgrades the connection):
 * <ul>
 *   <li>{@link #multiGet}: WAIT for all keys, then every GET in one write (two round trips).</li>
 *   <li>{@link #multiSet}: every SET in one write; not atomic for readers.</li>
 *   <li>{@link #append}: a compare-and-set loop (read, CAS old to old+value, retry until it sticks).
 *       Caveat: if another client concurrently sets the key to exactly old+value, this append is
 *       taken as done.</li>
 *   <li>A wait that times out cannot be cancelled (no CANCEL_WAIT): the connection is dropped and
 *       re-opened at the next call, so a late STOP_WAITING can never be read as another reply.
 *       With 2.1+ numbering the client sends CANCEL_WAIT and keeps the connection.</li>
 * </ul>
 *
 * <h2>Failures</h2>
 * Every call is bounded: waits by their timeout, everything else by {@link #timeout()}. The client
 * (re)connects with a fast back-off (100 us, each pause 1.5 times the last, up to 50 ms) until that bound, so it
 * rides over a server that starts late or restarts. Idempotent calls (get, set, check, wait,
 * numKeys, multiGet, multiSet) are retried on a fresh connection when the connection breaks
 * mid-call; the others (add, compareSet, deleteKey, append) are never sent twice: they fail with a
 * {@link StoreException}. A server that served this client and then refuses connections for 250 ms
 * is taken for gone ({@link StoreException}) instead of being retried until the deadline.
 *
 * <h2>Riding over a restart of the server ({@link TcpStoreConfig.Reconnect})</h2>
 * By default ({@code AUTO}) a client asks a jcomm server at connect whether it is durable (it keeps
 * its keys in a data directory, {@link TcpStoreServerConfig#dataDir()}); against a durable server
 * every call reconnects until its own deadline when the server goes away (killed, restarted),
 * re-sends the handshake (token, member declaration) and the call: waits are issued again, reads and
 * sets are sent again, and changes carry a request id ({@code internal.Wire#REQUEST_KEY}) that the
 * server remembers with the change, so a retried {@code add}, {@code compareSet}, {@code append} or
 * {@code deleteKey} whose first attempt was applied before the reply was lost returns the first
 * outcome and is not applied twice. Changes then wait for the server's acknowledgment (a {@code set}
 * that returned is in the server's data file), and a change the server refuses (store or data file
 * full, an {@code add} on a non-integer) throws {@link StoreRefusedException} and leaves the
 * connection usable. Against torch's server, an older jcomm server or a server in memory only,
 * nothing of this applies (the failure handling above). Before every request the client checks (one non-blocking read) that the
 * idle connection is still open, so a request is not sent into a connection the server has closed.
 * A server that demands a job token the client lacks, or refuses its token, fails at once with a
 * {@link StoreException} (no retry). Timeouts throw {@link CommTimeoutException} naming the keys.
 *
 * <h2>Member liveness (jcomm servers)</h2>
 * With {@link TcpStoreConfig#member()} set and a jcomm server, each connection declares this client
 * rank R of job J right after the probe (one more round trip; nothing is sent to a torch server, and
 * an older jcomm server that does not know the declaration simply leaves it unused). Every intended
 * close of a declared connection ({@link #close()}, and the drops and reconnects described above)
 * sends a goodbye first (best effort, at most 0.5 s). When a declared client
 * of J goes away without one (its process died), every pending or later {@link #wait} / {@link #get}
 * / {@link #multiGet} of J's declared clients whose keys are missing fails at once with a
 * {@link PeerFailureException} naming the dead rank; keys that exist are still served. The death is
 * final for the server's life. A process that exits without closing its store counts as dead.
 *
 * <p>Thread safe: one request in flight at a time, under a lock. {@link #close()} may be called from
 * any thread; a call blocked in it fails with {@link CommClosedException}.
 */
public final class TcpStore implements Store {

    private static final byte[] EMPTY = new byte[0];
    /**
     * Pauses between connection attempts: from 100 us, each 1.5 times the last, up to 50 ms, so a client that
     * starts before the server connects at most half the time it has waited after the server began to listen
     * (a refused attempt is one cheap syscall).
     */
    private static Backoff connectBackoff() {
        return Backoff.of(Duration.ofNanos(100_000), Duration.ofMillis(50), 1.5);
    }
    private static final int MAX_RETRIES = 3;
    /** Retries of one call while riding over a restart (each after a pause; the deadline bounds them first). */
    private static final int MAX_RECONNECT_RETRIES = 10_000;
    /**
     * How long a server that already served this client (or the client it was made from) may refuse
     * connections before the client takes it for gone: nothing listens on its port any more, so its
     * process has exited or died (before, refusals mean it is not up yet, and are retried to the deadline).
     */
    static final long SERVER_GONE_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
    /** How long a CANCEL_WAIT may take before the connection is dropped instead. */
    private static final Duration CANCEL_GRACE = Duration.ofSeconds(1);

    private final TcpStoreConfig config;
    private final String where;
    private final ReentrantLock lock = new ReentrantLock();
    private final AutoCloseable owned;
    private SecureRandom random; // created on first use: only the job-token handshake needs one
    private InetSocketAddress address;
    private volatile ClientChannel conn;
    private Numbering numbering;
    private boolean jcommServer;
    /** The current connection declared this client a member (see the class documentation). */
    private boolean declared;
    private volatile boolean closed;

    /** Whether the server answered this client, or the client it was made from ({@link #newClient()}). */
    private volatile boolean serverSeen;

    // riding over server restarts (TcpStoreConfig.Reconnect)
    /** The last server this client talked to said it is durable; kept while disconnected. */
    private boolean durableSeen;
    /** The current connection's server understands request ids. */
    private boolean requestIds;
    /** This client's id for request ids: random, one per client object. */
    private final long clientHi;
    private final long clientLo;
    /** Sequence number of the change in flight (one per call, the same on each retry). */
    private long seq;
    /** The call in flight was sent before, on a connection that broke. */
    private boolean resending;
    /** The last attempt of the call in flight carried a request id. */
    private boolean lastAttemptTagged;

    private TcpStore(TcpStoreConfig config, AutoCloseable owned) {
        this.config = config;
        this.owned = owned;
        this.where = config.host() + ":" + config.port();
        this.numbering = config.dialect().numbering();
        java.util.UUID id = java.util.UUID.randomUUID();
        this.clientHi = id.getMostSignificantBits();
        this.clientLo = id.getLeastSignificantBits();
    }

    /**
     * Connects to the server of {@code config}, retrying with back-off for up to
     * {@link TcpStoreConfig#connectTimeout()}.
     *
     * @throws StoreException when the server cannot be reached in time or refuses this client
     */
    public static TcpStore connect(TcpStoreConfig config) {
        return connect(config, null);
    }

    /**
     * Another client of the same server with the same configuration (member identity included), for
     * another thread. It knows that the server was up: should the server stop answering, it fails
     * within a fraction of a second instead of retrying until its deadline.
     */
    public TcpStore newClient() {
        return connect(config, null, true);
    }

    /**
     * Another client of the same server declared as rank {@code rank} of job {@code jobId} (a new
     * generation of a job that lost a rank re-forms under a new job id: the old job's waits fail for
     * the rest of the server's life). Like {@link #newClient()} it knows that the server was up.
     */
    @Override
    public TcpStore withMember(String jobId, int rank) {
        return connect(config.toBuilder().member(jobId, rank).build(), null, true);
    }

    /**
     * The ranks of this client's job that left the store without a goodbye so far (their process died),
     * sorted; empty for an undeclared client or a server that is not jcomm's. Never blocks beyond
     * {@link #timeout()}.
     */
    @Override
    public int[] deadMembers() {
        return call("deadMembers", Deadline.after(timeout()), true, (c, d) -> {
            if (!jcommServer || !declared) {
                return new int[0];
            }
            c.begin().u8(code(Op.CHECK)).i64(1).bytes(Wire.DEAD_KEY);
            c.send(d);
            int n = c.readU32(d);
            if (n < 0 || n > io.jcomm.cpu.store.internal.Members.MAX_DEAD_RANKS) {
                throw new IOException("dead-member reply with a count of " + Integer.toUnsignedString(n));
            }
            int[] dead = new int[n];
            for (int i = 0; i < n; i++) {
                dead[i] = c.readU32(d);
            }
            return dead;
        });
    }

    /** Always: each thread gets its own connection ({@link #newClient()}). */
    @Override
    public boolean supportsConcurrentClients() {
        return true;
    }

    /** {@link #newClient()}. */
    @Override
    public Store concurrentClient() {
        return newClient();
    }

    /** Connects; {@code owned} (e.g. an in-process server) is closed with the store. */
    static TcpStore connect(TcpStoreConfig config, AutoCloseable owned) {
        return connect(config, owned, false);
    }

    private static TcpStore connect(TcpStoreConfig config, AutoCloseable owned, boolean serverSeen) {
        Objects.requireNonNull(config, "config");
        TcpStore s = new TcpStore(config, owned);
        s.serverSeen = serverSeen;
        try {
            s.lock.lock();
            try {
                s.connection(Deadline.after(config.connectTimeout()), "connect");
            } finally {
                s.lock.unlock();
            }
        } catch (RuntimeException e) {
            s.close();
            throw e;
        }
        return s;
    }

    public TcpStoreConfig config() {
        return config;
    }

    /** True when the current connection declared this client a member of its job to a jcomm server. */
    public boolean isDeclaredMember() {
        lock.lock();
        try {
            return conn != null && declared;
        } finally {
            lock.unlock();
        }
    }

    /** True when the current connection is to a jcomm server (pipelined get, 2.1+ commands). */
    public boolean isJcommServer() {
        lock.lock();
        try {
            return conn != null && jcommServer;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public Duration timeout() {
        return config.timeout();
    }

    // ------------------------------------------------------------------ Store

    @Override
    public void set(String key, byte[] value) {
        checkValue(value, "set");
        call("set", Deadline.after(timeout()), true, true, (c, d) -> {
            boolean t = tag(c.begin(), "set");
            c.u8(code(Op.SET));
            putKey(c, key, "set");
            c.bytes(value);
            c.send(d);
            if (t) {
                status(c, d, "set");
            }
            return null;
        });
    }

    @Override
    public byte[] get(String key, Duration timeout) {
        Deadline d = Deadline.after(timeout);
        return call("get", d, true, (c, dd) -> {
            c.begin().u8(code(Op.WAIT)).i64(1);
            putKey(c, key, "get");
            if (jcommServer) {
                c.u8(code(Op.GET));
                putKey(c, key, "get");
                c.send(dd);
                awaitWait(c, dd, "get", key, timeout, true);
                return c.readBytes(config.maxValueBytes(), Deadline.after(timeout()));
            }
            c.send(dd);
            awaitWait(c, dd, "get", key, timeout, false);
            Deadline io = Deadline.after(timeout());
            c.begin().u8(code(Op.GET));
            putKey(c, key, "get");
            c.send(io);
            return c.readBytes(config.maxValueBytes(), io);
        });
    }

    @Override
    public long add(String key, long delta) {
        return call("add", Deadline.after(timeout()), false, true, (c, d) -> {
            boolean t = tag(c.begin(), "add");
            c.u8(code(Op.ADD));
            putKey(c, key, "add");
            c.i64(delta);
            c.send(d);
            if (t) {
                status(c, d, "add");
            }
            return c.readI64(d);
        });
    }

    /** ADD on a key sent as is (no "/" prefix): torch's {@code init/} worker counter. */
    long addUnprefixed(byte[] wireKey, long delta) {
        return call("add", Deadline.after(timeout()), false, true, (c, d) -> {
            boolean t = tag(c.begin(), "add");
            c.u8(code(Op.ADD)).bytes(wireKey).i64(delta);
            c.send(d);
            if (t) {
                status(c, d, "add");
            }
            return c.readI64(d);
        });
    }

    @Override
    public byte[] compareSet(String key, byte[] expected, byte[] desired) {
        checkValue(expected, "compareSet");
        checkValue(desired, "compareSet");
        return call("compareSet", Deadline.after(timeout()), false, true, (c, d) -> {
            boolean t = tag(c.begin(), "compareSet");
            c.u8(code(Op.COMPARE_SET));
            putKey(c, key, "compareSet");
            c.bytes(expected).bytes(desired);
            c.send(d);
            if (t) {
                status(c, d, "compareSet");
            }
            return c.readBytes(config.maxValueBytes(), d);
        });
    }

    @Override
    public boolean check(List<String> keys) {
        if (keys.isEmpty()) {
            return true;
        }
        return call("check", Deadline.after(timeout()), true, (c, d) -> {
            c.begin().u8(code(Op.CHECK)).i64(keys.size());
            for (String k : keys) {
                putKey(c, k, "check");
            }
            c.send(d);
            int r = c.readU8(d);
            if (r != Wire.CHECK_READY && r != Wire.CHECK_NOT_READY) {
                throw new IOException("unexpected CHECK reply " + r);
            }
            return r == Wire.CHECK_READY;
        });
    }

    @Override
    public void wait(List<String> keys, Duration timeout) {
        if (keys.isEmpty()) {
            return;
        }
        Deadline d = Deadline.after(timeout);
        call("wait", d, true, (c, dd) -> {
            putWait(c, keys, "wait");
            c.send(dd);
            awaitWait(c, dd, "wait", keys, timeout, false);
            return null;
        });
    }

    @Override
    public boolean deleteKey(String key) {
        return call("deleteKey", Deadline.after(timeout()), false, true, (c, d) -> {
            boolean t = tag(c.begin(), "deleteKey");
            c.u8(code(Op.DELETE_KEY));
            putKey(c, key, "deleteKey");
            c.send(d);
            if (t) {
                status(c, d, "deleteKey");
            }
            return c.readI64(d) > 0;
        });
    }

    @Override
    public long numKeys() {
        return call("numKeys", Deadline.after(timeout()), true, (c, d) -> {
            c.begin().u8(code(Op.GETNUMKEYS));
            c.send(d);
            return c.readI64(d);
        });
    }

    @Override
    public List<byte[]> multiGet(List<String> keys, Duration timeout) {
        if (keys.isEmpty()) {
            return new ArrayList<>();
        }
        Deadline d = Deadline.after(timeout);
        return call("multiGet", d, true, (c, dd) -> {
            putWait(c, keys, "multiGet");
            if (jcommServer) {
                putGets(c, keys);
                c.send(dd);
                awaitWait(c, dd, "multiGet", keys, timeout, true);
            } else {
                c.send(dd);
                awaitWait(c, dd, "multiGet", keys, timeout, false);
                c.begin();
                putGets(c, keys);
                c.send(Deadline.after(timeout()));
            }
            Deadline io = Deadline.after(timeout());
            List<byte[]> out = new ArrayList<>(keys.size());
            for (int i = 0; i < keys.size(); i++) {
                out.add(c.readBytes(config.maxValueBytes(), io));
            }
            return out;
        });
    }

    private void putGets(ClientChannel c, List<String> keys) {
        if (numbering.supports(Op.MULTI_GET)) {
            c.u8(code(Op.MULTI_GET)).i64(keys.size());
            for (String k : keys) {
                putKey(c, k, "multiGet");
            }
        } else {
            for (String k : keys) {
                c.u8(code(Op.GET));
                putKey(c, k, "multiGet");
            }
        }
    }

    @Override
    public void multiSet(List<String> keys, List<byte[]> values) {
        if (keys.size() != values.size()) {
            throw ctx("multiSet").invalidArgument(keys.size() + " keys but " + values.size() + " values");
        }
        if (keys.isEmpty()) {
            return;
        }
        for (byte[] v : values) {
            checkValue(v, "multiSet");
        }
        call("multiSet", Deadline.after(timeout()), true, true, (c, d) -> {
            boolean t = numbering.supports(Op.MULTI_SET) && tag(c.begin(), "multiSet");
            if (!t) {
                c.begin();
            }
            if (numbering.supports(Op.MULTI_SET)) {
                c.u8(code(Op.MULTI_SET)).i64(keys.size());
                for (int i = 0; i < keys.size(); i++) {
                    putKey(c, keys.get(i), "multiSet");
                    c.bytes(values.get(i));
                }
            } else {
                for (int i = 0; i < keys.size(); i++) {
                    c.u8(code(Op.SET));
                    putKey(c, keys.get(i), "multiSet");
                    c.bytes(values.get(i));
                }
            }
            c.send(d);
            if (t) {
                status(c, d, "multiSet");
            }
            return null;
        });
    }

    @Override
    public void append(String key, byte[] value) {
        checkValue(value, "append");
        Boolean done = call("append", Deadline.after(timeout()), false, true, (c, d) -> {
            if (!numbering.supports(Op.APPEND)) {
                return Boolean.FALSE;
            }
            boolean t = tag(c.begin(), "append");
            c.u8(code(Op.APPEND));
            putKey(c, key, "append");
            c.bytes(value);
            c.send(d);
            if (t) {
                status(c, d, "append");
            }
            return Boolean.TRUE;
        });
        if (!done) {
            appendByCompareSet(key, value);
        }
    }

    /** Legacy emulation of APPEND (see the class documentation for its caveat). */
    private void appendByCompareSet(String key, byte[] value) {
        Deadline d = Deadline.after(timeout());
        Backoff backoff = Backoff.doubling(Duration.ofNanos(50_000), Duration.ofMillis(5));
        while (true) {
            byte[] cur = check(List.of(key)) ? get(key, d.remaining()) : EMPTY;
            byte[] desired = Arrays.copyOf(cur, cur.length + value.length);
            System.arraycopy(value, 0, desired, cur.length, value.length);
            byte[] r = compareSet(key, cur, desired);
            if (Arrays.equals(r, desired)) {
                return;
            }
            if (d.isExpired()) {
                throw new CommTimeoutException(ctx("append"), "could not append to '" + key + "' within "
                        + timeout().toMillis() + " ms (concurrent updates)");
            }
            backoff.pause(d);
        }
    }

    /**
     * Closes the connection (and an in-process server this store owns). Idempotent; any thread. A
     * declared member says goodbye first (bounded), so that the server does not take the close for a
     * death; a call blocked in another thread fails with {@link CommClosedException}.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        ClientChannel c = conn;
        if (c != null) {
            c.abort();
        }
        boolean locked = false;
        try {
            locked = lock.tryLock(2, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (locked) {
            try {
                drop();
            } finally {
                lock.unlock();
            }
        }
        if (owned != null) {
            try {
                owned.close();
            } catch (Exception e) {
                throw new StoreException(ctx("close"), "closing the in-process store server failed: " + e, e);
            }
        }
    }

    @Override
    public String toString() {
        return "TcpStore(" + where + ", " + config.dialect() + ")";
    }

    // ------------------------------------------------------------------ plumbing

    @FunctionalInterface
    private interface Body<T> {
        T run(ClientChannel c, Deadline d) throws IOException, TimeoutSignal;
    }

    /** A refusal that no retry can fix (token problems). */
    private static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;

        Refused(String m) {
            super(m, null, false, false);
        }
    }

    private OpContext ctx(String op) {
        return OpContext.of(config.group(), config.rank(), op);
    }

    private int code(Op op) {
        return numbering.code(op);
    }

    private void checkOpen(String op) {
        if (closed) {
            throw new CommClosedException(ctx(op), "the store client for " + where + " is closed");
        }
    }

    private void checkValue(byte[] value, String op) {
        Objects.requireNonNull(value, "value");
        if (value.length > config.maxValueBytes()) {
            throw ctx(op).invalidArgument("value of " + value.length + " bytes exceeds maxValueBytes "
                    + config.maxValueBytes());
        }
    }

    private void putKey(ClientChannel c, String key, String op) {
        if (key == null || key.isEmpty()) {
            throw ctx(op).invalidArgument("store keys must be non-empty");
        }
        int n = c.key('/', key);
        if (n > config.maxKeyBytes()) {
            throw ctx(op).invalidArgument("key of " + n + " bytes exceeds maxKeyBytes " + config.maxKeyBytes());
        }
    }

    private void putWait(ClientChannel c, List<String> keys, String op) {
        c.begin().u8(code(Op.WAIT)).i64(keys.size());
        for (String k : keys) {
            putKey(c, k, op);
        }
    }

    /**
     * Reads the reply of a WAIT ({@code keys}: one key or a list, for the message). On timeout the connection is kept in sync: with CANCEL_WAIT when the
     * numbering has it and nothing else was pipelined, otherwise by dropping the connection.
     */
    private void awaitWait(ClientChannel c, Deadline d, String op, Object keys, Duration timeout,
                           boolean pipelined) throws IOException {
        int r;
        try {
            r = c.readU8(d);
        } catch (TimeoutSignal t) {
            if (!pipelined && numbering.supports(Op.CANCEL_WAIT)) {
                if (cancelWait(c, op, keys)) {
                    return; // the keys appeared while cancelling
                }
            } else {
                drop(); // a late STOP_WAITING (or the pipelined reply) must never be read as another reply
            }
            throw new CommTimeoutException(ctx(op), "timed out after " + timeout.toMillis()
                    + " ms waiting for keys " + (keys instanceof String ? List.of(keys) : keys) + " in the store at "
                    + where);
        }
        if (r == Wire.WAIT_MEMBER_FAILED && declared) {
            throw memberFailed(c, op, keys);
        }
        if (r != Wire.WAIT_STOP_WAITING) {
            throw new IOException("unexpected WAIT reply " + r);
        }
    }

    /**
     * After the member-failure byte: reads the dead rank, drops the connection (the server closes it)
     * and returns the error to throw.
     */
    private PeerFailureException memberFailed(ClientChannel c, String op, Object keys) {
        int dead = -1;
        try {
            dead = c.readU32(Deadline.after(timeout().compareTo(CANCEL_GRACE) < 0 ? timeout() : CANCEL_GRACE));
        } catch (IOException | TimeoutSignal e) {
            // the rank stays unknown
        }
        drop();
        String job = config.member().map(TcpStoreConfig.Member::jobId).orElse("?");
        return new PeerFailureException(ctx(op), dead, "rank " + (dead < 0 ? "?" : Integer.toString(dead)) + " of job "
                + job + " left the store without a goodbye (process died?) while this rank waited for keys "
                + (keys instanceof String ? List.of(keys) : keys) + " (store at " + where + ")");
    }

    /**
     * Sends CANCEL_WAIT; true if the wait had completed meanwhile. Drops the connection on trouble.
     *
     * @throws PeerFailureException when the server answered the wait with a member failure first
     */
    private boolean cancelWait(ClientChannel c, String op, Object keys) {
        try {
            Deadline g = Deadline.after(timeout().compareTo(CANCEL_GRACE) < 0 ? timeout() : CANCEL_GRACE);
            c.begin().u8(code(Op.CANCEL_WAIT));
            c.send(g);
            int r = c.readU8(g);
            if (r == Wire.WAIT_MEMBER_FAILED && declared) {
                throw memberFailed(c, op, keys);
            }
            if (r == Wire.WAIT_CANCELED) {
                return false;
            }
            if (r == Wire.WAIT_STOP_WAITING && c.readU8(g) == Wire.WAIT_CANCELED) {
                return true;
            }
        } catch (IOException | TimeoutSignal e) {
            // fall through: drop
        }
        drop();
        return false;
    }

    private <T> T call(String op, Deadline d, boolean retryable, Body<T> body) {
        return call(op, d, retryable, false, body);
    }

    /**
     * Runs {@code body} on a connection; on a broken connection, runs it again on a new one when that
     * is safe: {@code retryable} calls always (up to a few times, or until the deadline while riding
     * over a restart), others only when the broken attempt carried a request id. {@code change}: the
     * call changes the store and gets a sequence number for its request id.
     */
    private <T> T call(String op, Deadline d, boolean retryable, boolean change, Body<T> body) {
        lock.lock();
        try {
            int retries = 0;
            Backoff pause = Backoff.doubling(Duration.ofNanos(100_000), Duration.ofMillis(50));
            if (change) {
                seq++;
            }
            resending = false;
            lastAttemptTagged = false;
            while (true) {
                checkOpen(op);
                ClientChannel c = connection(d, op);
                try {
                    return body.run(c, d);
                } catch (TimeoutSignal t) {
                    drop();
                    throw new CommTimeoutException(ctx(op), "no reply from the store server at " + where
                            + " within the deadline");
                } catch (ClientChannel.ReplyTooLarge e) {
                    drop();
                    throw new ProtocolException(ctx(op), e.getMessage() + " (maxValueBytes, server " + where + ")");
                } catch (IOException e) {
                    drop();
                    checkOpen(op);
                    if (Thread.currentThread().isInterrupted()) {
                        throw new StoreException(ctx(op), "interrupted", e);
                    }
                    boolean riding = reconnecting();
                    if (!(retryable || lastAttemptTagged) || d.isExpired()
                            || ++retries > (riding ? MAX_RECONNECT_RETRIES : MAX_RETRIES)) {
                        throw new StoreException(ctx(op), "connection to the store server at " + where
                                + " failed during " + op + ": " + e.getMessage(), e);
                    }
                    resending = true;
                    if (riding && retries > 1) {
                        // the server accepts but the connection breaks again: do not spin
                        pause.pause(d);
                    }
                } catch (RuntimeException e) {
                    if (conn == c && c.pending() > 0) {
                        c.begin(); // discard a half-encoded request (e.g. an invalid key)
                    }
                    throw e;
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** Closes the current connection (a declared one says goodbye first: this is no death). */
    private void drop() {
        ClientChannel c = conn;
        conn = null;
        declared = false;
        if (c != null) {
            c.close();
        }
    }

    /** The open connection, or a new one (with back-off) within {@code d}. Lock held. */
    private ClientChannel connection(Deadline d, String op) {
        ClientChannel c = conn;
        if (c != null) {
            if (c.idleAndOpen()) {
                return c;
            }
            drop();
        }
        Backoff backoff = connectBackoff();
        int attempts = 0;
        long refusedSince = 0;
        Exception last = null;
        while (true) {
            checkOpen(op);
            attempts++;
            c = null;
            try {
                if (address == null || address.isUnresolved()) {
                    address = new InetSocketAddress(config.host(), config.port());
                    if (address.isUnresolved()) {
                        throw new IOException("cannot resolve " + config.host());
                    }
                }
                c = ClientChannel.connect(address, d);
                conn = c;
                handshake(c, d);
                serverSeen = true;
                return c;
            } catch (Refused r) {
                drop();
                throw new StoreException(ctx(op), r.getMessage());
            } catch (TimeoutSignal t) {
                drop();
                last = new IOException("deadline passed during connect");
                break;
            } catch (IOException e) {
                drop();
                last = e;
                address = null;
                if (serverSeen && e instanceof java.net.ConnectException && !reconnecting()) {
                    long now = System.nanoTime();
                    if (refusedSince == 0) {
                        refusedSince = now;
                    } else if (now - refusedSince >= SERVER_GONE_NANOS) {
                        throw new StoreException(ctx(op), "the store server at " + where + " is gone: it served this "
                                + "client, and has refused connections for " + (now - refusedSince) / 1_000_000
                                + " ms since (its process exited or died)", e);
                    }
                }
            }
            if (Thread.currentThread().isInterrupted()) {
                throw new StoreException(ctx(op), "interrupted while connecting to the store at " + where);
            }
            if (!backoff.pause(d)) {
                break;
            }
        }
        throw new StoreException(ctx(op), "cannot reach the store server at " + where + " (" + attempts
                + " attempts): " + (last == null ? "deadline passed" : last.getMessage()), last);
    }

    private void handshake(ClientChannel c, Deadline d) throws IOException, TimeoutSignal, Refused {
        TcpStoreDialect dialect = config.dialect();
        Numbering num = dialect.numbering();
        boolean jcomm = false;
        byte[] token = config.tokenRef();
        if (token != null) {
            if (random == null) {
                random = new SecureRandom();
            }
            byte[] cn = TokenProof.nonce(random);
            c.begin().u8(Wire.AUTH_MARKER).raw(Wire.AUTH_MAGIC).raw(cn);
            c.send(d);
            int m;
            try {
                m = c.readU8(d);
            } catch (java.io.EOFException e) {
                throw new Refused("the store server at " + where + " closed the connection on the job-token "
                        + "handshake (a torch server, or an old jcomm server?)");
            }
            if (m != Wire.AUTH_MARKER) {
                throw new Refused("the store server at " + where + " does not speak the job-token handshake");
            }
            int status = c.readU8(d);
            if (status == Wire.AUTH_NOT_CONFIGURED) {
                throw new Refused("the store server at " + where + " has no job token but this client has one; "
                        + "refusing an unauthenticated server");
            }
            if (status != Wire.AUTH_CHALLENGE) {
                throw new Refused("the store server at " + where + " refused the handshake (status " + status + ")");
            }
            byte[] sn = c.readRaw(Wire.NONCE_BYTES, d);
            byte[] sp = c.readRaw(Wire.MAC_BYTES, d);
            if (!TokenProof.matches(sp, Wire.serverProof(token, cn, sn))) {
                throw new Refused("job token mismatch: the store server at " + where
                        + " could not prove it holds this client's token");
            }
            c.begin().raw(Wire.clientProof(token, cn, sn));
            c.send(d);
            int ok;
            try {
                ok = c.readU8(d);
            } catch (java.io.EOFException e) {
                ok = -1;
            }
            if (ok != Wire.AUTH_OK) {
                throw new Refused("job token mismatch: the store server at " + where + " refused this client's token");
            }
            jcomm = true;
        }
        c.begin();
        if (dialect.sendsValidate()) {
            c.u8(num.code(Op.VALIDATE)).u32(Wire.VALIDATION_MAGIC);
        }
        int nonce = 0;
        if (dialect.sendsPing()) {
            nonce = (ThreadLocalRandom.current().nextInt() & ~0xFF) | 0x5A; // low byte never AUTH_MARKER
            c.u8(num.code(Op.PING)).u32(nonce);
        }
        boolean probe = config.probe() || token != null;
        if (probe) {
            c.u8(num.code(Op.CHECK)).i64(1).bytes(Wire.PROBE_KEY);
        }
        if (c.pending() > 0) {
            c.send(d);
        }
        if (dialect.sendsPing()) {
            int b0 = firstReplyByte(c, d);
            byte[] rest = c.readRaw(3, d);
            int echoed = b0 | (rest[0] & 0xFF) << 8 | (rest[1] & 0xFF) << 16 | (rest[2] & 0xFF) << 24;
            if (echoed != nonce) {
                throw new IOException("PING answered with a wrong nonce");
            }
        }
        if (probe) {
            int r = firstReplyByte(c, d);
            if (r == Wire.CHECK_READY) {
                jcomm = true;
            } else if (r != Wire.CHECK_NOT_READY) {
                throw new IOException("unexpected reply " + r + " to the capability probe");
            }
        }
        if (jcomm && num == Numbering.TORCH_1_13) {
            num = Numbering.TORCH_2_1; // the probe upgraded the connection on the server
        }
        boolean member = false;
        int durable = -1;
        if (jcomm) {
            // the durability query and the member declaration in one round trip
            boolean ask = config.reconnect() != TcpStoreConfig.Reconnect.NEVER;
            TcpStoreConfig.Member m = config.member().orElse(null);
            c.begin();
            if (ask) {
                c.u8(num.code(Op.CHECK)).i64(1).bytes(Wire.DURABLE_KEY);
            }
            if (m != null) {
                // armed before sending: from now on every close of this connection says goodbye, so that a
                // declaration the server took is never followed by a silent close
                c.armGoodbye(Wire.goodbyeFrame(num));
                c.u8(num.code(Op.CHECK)).i64(3).bytes(Wire.MEMBER_KEY)
                        .bytes(m.jobId().getBytes(StandardCharsets.UTF_8)).i64(Wire.MEMBER_RANK_BYTES).u32(m.rank());
            }
            if (c.pending() > 0) {
                c.send(d);
                if (ask) {
                    durable = firstReplyByte(c, d);
                    if (durable != Wire.CHECK_READY && durable != Wire.CHECK_NOT_READY && durable != Wire.DURABLE_NO) {
                        throw new IOException("unexpected reply " + durable + " to the durability query");
                    }
                }
                if (m != null) {
                    member = declared(c, d);
                }
            }
        }
        this.numbering = num;
        this.jcommServer = jcomm;
        this.declared = member;
        this.requestIds = durable == Wire.CHECK_READY || durable == Wire.DURABLE_NO;
        if (durable >= 0) {
            this.durableSeen = durable == Wire.CHECK_READY;
        }
    }

    /** Whether calls ride over a restart of the server now ({@link TcpStoreConfig.Reconnect}). Lock held. */
    private boolean reconnecting() {
        return switch (config.reconnect()) {
            case ALWAYS -> true;
            case AUTO -> durableSeen;
            case NEVER -> false;
        };
    }

    /**
     * Puts the request id of the change in flight in front of it when this client rides over restarts
     * and the server tracks request ids; returns whether it did (the reply then starts with a status).
     *
     * @throws StoreException when the change was sent before on a broken connection and cannot be sent
     *                        again safely (the server it reconnected to does not track request ids)
     */
    private boolean tag(ClientChannel c, String op) {
        boolean t = requestIds && reconnecting();
        if (!t && resending && lastAttemptTagged) {
            throw new StoreException(ctx(op), "the connection to the store server at " + where + " broke during "
                    + op + " and the server now does not track request ids: not sent again (it may or may not "
                    + "have been applied)");
        }
        lastAttemptTagged = t;
        if (t) {
            c.u8(code(Op.CHECK)).i64(2).bytes(Wire.REQUEST_KEY).i64(Wire.REQUEST_ID_BYTES).i64(clientHi).i64(clientLo)
                    .i64(seq);
        }
        return t;
    }

    /** Reads the status in front of the reply of a change with a request id. */
    private void status(ClientChannel c, Deadline d, String op) throws IOException, TimeoutSignal {
        int s = c.readU8(d);
        if (s == Wire.REQUEST_OK) {
            return;
        }
        if (s != Wire.REQUEST_REFUSED) {
            throw new IOException("unexpected status " + s + " of a change");
        }
        int len = c.readU32(d);
        if (len < 0 || len > Wire.MAX_REFUSAL_BYTES) {
            throw new IOException("refusal of " + Integer.toUnsignedString(len) + " bytes");
        }
        String why = new String(c.readRaw(len, d), StandardCharsets.UTF_8);
        throw new StoreRefusedException(ctx(op), "the store server at " + where + " refused " + op + ": " + why);
    }

    /**
     * Reads the reply to a member declaration ({@code CHECK [MEMBER_KEY, jobId, rank u32]}): true when
     * the server took it (READY); false when it does not know the extension (NOT_READY).
     */
    private boolean declared(ClientChannel c, Deadline d) throws IOException, TimeoutSignal, Refused {
        int r = firstReplyByte(c, d);
        if (r == Wire.CHECK_READY) {
            return true;
        }
        if (r == Wire.CHECK_NOT_READY) {
            c.armGoodbye(null); // a jcomm server without member liveness
            return false;
        }
        throw new IOException("unexpected reply " + r + " to the member declaration");
    }

    /** Reads the first byte of a reply, recognising a token refusal ({@code FA status}). */
    private int firstReplyByte(ClientChannel c, Deadline d) throws IOException, TimeoutSignal, Refused {
        int b = c.readU8(d);
        if (b == Wire.AUTH_MARKER) {
            int status;
            try {
                status = c.readU8(d);
            } catch (IOException e) {
                status = -1;
            }
            if (status == Wire.AUTH_REQUIRED) {
                throw new Refused("the store server at " + where + " requires a job token and this client has none "
                        + "(TcpStoreConfig.token / " + Settings.TOKEN_FILE.name() + ")");
            }
            throw new IOException("unexpected reply byte 0xFA (status " + status + ")");
        }
        return b;
    }
}
