package io.jcomm.device.internal.nccl;

import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.device.testkit.DeviceMemory;
import io.jcomm.device.testkit.HostReduce;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A fake of NCCL and the few CUDA runtime calls the communicator makes, for unit tests without a
 * GPU: "device memory" is a heap of direct buffers at synthetic addresses, collectives run on that
 * memory across threads-as-ranks (values are real), point-to-point goes through mailboxes, and
 * group calls defer their operations to {@code ncclGroupEnd} as NCCL does. Streams complete
 * immediately unless {@link #hang} holds them.
 *
 * <p>It records what a test needs to check the Java logic: every call per rank (name and stream),
 * the group depth per thread, the unique ids used, calls made on a communicator after it was
 * aborted (must never happen), and it injects failures: a result code for the next named call, an
 * asynchronous error, slow init or abort, and capture status.
 */
public class FakeNccl implements NcclApi {

    /** NCCL's own error strings ({@code ncclGetErrorString}). */
    static final Map<Integer, String> ERROR_STRINGS = Map.of(
            0, "no error",
            1, "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
            2, "unhandled system error (run with NCCL_DEBUG=INFO for details)",
            3, "internal error - please report this issue to the NCCL developers",
            4, "invalid argument (run with NCCL_DEBUG=WARN for details)",
            5, "invalid usage (run with NCCL_DEBUG=WARN for details)",
            6, "remote process exited or there was a network error",
            7, "NCCL operation in progress");

    private final int deviceCount;
    private final int version;
    private final Duration timeout;
    private final TreeMap<Long, ByteBuffer> heap = new TreeMap<>();
    private long nextAddress = 0x7000_0000_0000L;
    private final Map<String, Group> groups = new ConcurrentHashMap<>();
    private final ThreadLocal<Integer> currentDevice = ThreadLocal.withInitial(() -> 0);
    private final ThreadLocal<List<Deferred>> pending = ThreadLocal.withInitial(ArrayList::new);
    private final ThreadLocal<int[]> groupDepth = ThreadLocal.withInitial(() -> new int[1]);
    private final Map<Integer, List<String>> calls = new ConcurrentHashMap<>();
    private final List<String> violations = new CopyOnWriteArrayList<>();
    private final Map<String, LinkedBlockingQueue<Integer>> failNext = new ConcurrentHashMap<>();
    private final AtomicInteger uniqueIdCalls = new AtomicInteger();
    private final Map<Long, Boolean> capturing = new ConcurrentHashMap<>();
    private final Map<Long, Boolean> eventPending = new ConcurrentHashMap<>();
    private final AtomicInteger nextEvent = new AtomicInteger(1);
    private volatile boolean hung;
    private volatile Duration initDelay = Duration.ZERO;
    private volatile Duration abortDelay = Duration.ZERO;
    private volatile String lastError = "";
    private final Random random = new Random(42);

    public FakeNccl(int deviceCount, int version, Duration timeout) {
        this.deviceCount = deviceCount;
        this.version = version;
        this.timeout = timeout;
    }

    public FakeNccl() {
        this(8, 22903, Duration.ofSeconds(20));
    }

    // ---- failure injection and inspection ----

    /** The next call named {@code call} (e.g. {@code ncclAllReduce}, {@code cudaMallocAsync}) returns {@code code}. */
    public void failNext(String call, int code) {
        failNext.computeIfAbsent(call, k -> new LinkedBlockingQueue<>()).add(code);
    }

    /** The next call named {@code call} made by a thread whose current device is {@code device} returns {@code code}. */
    public void failNext(int device, String call, int code) {
        failNext(call + "@device" + device, code);
    }

    /** While true, streams and recorded events stay "not ready" (work never completes). */
    public void hang(boolean h) {
        hung = h;
        if (!h) {
            eventPending.replaceAll((k, v) -> false);
        }
    }

    public void initDelay(Duration d) {
        initDelay = d;
    }

    public void abortDelay(Duration d) {
        abortDelay = d;
    }

    public void lastError(String s) {
        lastError = s;
    }

    /** Marks {@code stream} as being captured into a graph. */
    public void capturing(long stream, boolean c) {
        capturing.put(stream, c);
    }

    /** Sets the asynchronous error that {@code ncclCommGetAsyncError} reports on rank {@code rank}'s communicators. */
    public void asyncError(int rank, int code) {
        for (Group g : groups.values()) {
            Comm c = g.members[rank];
            if (c != null) {
                c.asyncError = code;
            }
        }
    }

    /** Calls made by threads whose current device is {@code device} (ranks use device = rank). */
    public List<String> calls(int device) {
        return List.copyOf(calls.getOrDefault(device, List.of()));
    }

    /** Problems the fake detected in how it was used (calls after abort, unbalanced groups...). */
    public List<String> violations() {
        return List.copyOf(violations);
    }

    public int uniqueIdCalls() {
        return uniqueIdCalls.get();
    }

    /** The unique id rank {@code rank} initialised with, per communicator, in creation order. */
    public List<byte[]> idsUsedBy(int rank) {
        List<byte[]> out = new ArrayList<>();
        for (Group g : groups.values()) {
            if (g.members.length > rank && g.members[rank] != null) {
                out.add(g.id.clone());
            }
        }
        return out;
    }

    /** Communicators of rank {@code rank} that were aborted. */
    public int abortsOf(int rank) {
        int n = 0;
        for (Group g : groups.values()) {
            if (g.members.length > rank && g.members[rank] != null && g.members[rank].aborted) {
                n++;
            }
        }
        return n;
    }

    /** Group depth of the calling thread. */
    public int groupDepth() {
        return groupDepth.get()[0];
    }

    private void log(String call) {
        calls.computeIfAbsent(currentDevice.get(), k -> Collections.synchronizedList(new ArrayList<>())).add(call);
    }

    private int injected(String call) {
        LinkedBlockingQueue<Integer> q = failNext.get(call + "@device" + currentDevice.get());
        Integer code = q == null ? null : q.poll();
        if (code == null) {
            q = failNext.get(call);
            code = q == null ? null : q.poll();
        }
        return code == null ? 0 : code;
    }

    // ---- fake device memory ----

    /** Allocates {@code bytes} of zeroed "device" memory. */
    public synchronized long malloc(long bytes) {
        long addr = nextAddress;
        nextAddress += ((Math.max(1, bytes) + 255) / 256) * 256 + 256;
        heap.put(addr, ByteBuffer.allocateDirect((int) Math.max(1, bytes)).order(ByteOrder.LITTLE_ENDIAN));
        return addr;
    }

    synchronized boolean freeMem(long addr) {
        return heap.remove(addr) != null;
    }

    /** The {@code bytes} of fake device memory at {@code addr}, or {@code null} when outside any allocation. */
    public synchronized ByteBuffer at(long addr, long bytes) {
        Map.Entry<Long, ByteBuffer> e = heap.floorEntry(addr);
        if (e == null) {
            return null;
        }
        long off = addr - e.getKey();
        if (off < 0 || off + bytes > e.getValue().capacity()) {
            return null;
        }
        return e.getValue().slice((int) off, (int) bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** A {@link DeviceMemory} for the conformance kit on {@code cuda:device}, streams given by {@code stream}. */
    public DeviceMemory memory(int device, long stream) {
        Device dev = Device.cuda(device);
        return new DeviceMemory() {
            @Override
            public Device device() {
                return dev;
            }

            @Override
            public StreamHandle stream() {
                return new StreamHandle(dev, stream);
            }

            @Override
            public Tensor allocate(DType dtype, long... shape) {
                long bytes = dtype.byteSize();
                for (long s : shape) {
                    bytes *= s;
                }
                long addr = malloc(bytes);
                return Tensor.onDevice(dev, addr, dtype, shape, null);
            }

            @Override
            public void write(Tensor target, Tensor source) {
                ByteBuffer b = at(target.address(), target.byteSize());
                b.put(source.buffer());
            }

            @Override
            public Tensor read(Tensor t) {
                Tensor h = Tensor.allocate(t.dtype(), t.shape());
                h.buffer().put(at(t.address(), t.byteSize()));
                return h;
            }
        };
    }

    // ---- NCCL, global ----

    @Override
    public int getVersion(int[] out) {
        out[0] = version;
        return 0;
    }

    @Override
    public int getUniqueId(byte[] out) {
        log("ncclGetUniqueId");
        uniqueIdCalls.incrementAndGet();
        int f = injected("ncclGetUniqueId");
        if (f != 0) {
            return f;
        }
        synchronized (random) {
            random.nextBytes(out);
        }
        return 0;
    }

    @Override
    public String getErrorString(int result) {
        return ERROR_STRINGS.getOrDefault(result, "unknown result code");
    }

    @Override
    public int groupStart() {
        log("ncclGroupStart");
        groupDepth.get()[0]++;
        return 0;
    }

    @Override
    public int groupEnd() {
        log("ncclGroupEnd");
        int[] d = groupDepth.get();
        if (d[0] == 0) {
            violations.add("ncclGroupEnd without ncclGroupStart");
            return NcclConstants.INVALID_USAGE;
        }
        if (--d[0] > 0) {
            return 0;
        }
        List<Deferred> ops = new ArrayList<>(pending.get());
        pending.get().clear();
        int f = injected("ncclGroupEnd");
        if (f != 0) {
            return f;
        }
        // sends first (they are buffered), then everything else in order
        int result = 0;
        for (Deferred op : ops) {
            if (op.send) {
                result = Math.max(result, op.call());
            }
        }
        for (Deferred op : ops) {
            if (!op.send) {
                result = Math.max(result, op.call());
            }
        }
        return result;
    }

    /** An operation queued inside a group. */
    private static final class Deferred {
        final boolean send;
        final java.util.function.IntSupplier op;

        Deferred(boolean send, java.util.function.IntSupplier op) {
            this.send = send;
            this.op = op;
        }

        int call() {
            return op.getAsInt();
        }
    }

    /** Runs {@code op} now, or at the group's end inside a group. */
    private int dispatch(boolean send, java.util.function.IntSupplier op) {
        if (groupDepth.get()[0] > 0) {
            pending.get().add(new Deferred(send, op));
            return 0;
        }
        return op.getAsInt();
    }

    @Override
    public int commInitRank(NcclComm[] out, int nranks, byte[] uniqueId, int rank) {
        log("ncclCommInitRank");
        int f = injected("ncclCommInitRank");
        if (f != 0) {
            return f;
        }
        if (rank < 0 || rank >= nranks) {
            return NcclConstants.INVALID_ARGUMENT;
        }
        sleep(initDelay);
        return join(out, uniqueId, nranks, rank, currentDevice.get());
    }

    /** Joins rank {@code rank} to the group of {@code id}, waiting until all {@code nranks} joined. */
    private int join(NcclComm[] out, byte[] id, int nranks, int rank, int device) {
        String key = Arrays.toString(id);
        Group g = groups.computeIfAbsent(key, k -> new Group(id.clone(), nranks));
        Comm c = new Comm(g, rank, device);
        synchronized (g) {
            if (g.nranks != nranks || g.members[rank] != null) {
                return NcclConstants.INVALID_USAGE;
            }
            for (Comm other : g.members) {
                if (other != null && other.device == device) {
                    lastError = "Duplicate GPU detected : rank " + rank + " and rank " + other.rank + " both on CUDA device " + device;
                    return NcclConstants.INVALID_USAGE;
                }
            }
            g.members[rank] = c;
            g.joined++;
            g.notifyAll();
            long end = System.nanoTime() + timeout.toNanos();
            while (g.joined < nranks) {
                long left = end - System.nanoTime();
                if (left <= 0) {
                    return NcclConstants.REMOTE_ERROR;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(g, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return NcclConstants.SYSTEM_ERROR;
                }
            }
        }
        out[0] = c;
        return 0;
    }

    // ---- CUDA runtime ----

    @Override
    public int cudaGetDeviceCount(int[] out) {
        out[0] = deviceCount;
        return 0;
    }

    @Override
    public int cudaSetDevice(int device) {
        if (device < 0 || device >= deviceCount) {
            return 101; // cudaErrorInvalidDevice
        }
        currentDevice.set(device);
        return 0;
    }

    @Override
    public int cudaGetDevice(int[] out) {
        out[0] = currentDevice.get();
        return 0;
    }

    @Override
    public int cudaDriverGetVersion(int[] out) {
        out[0] = 13000;
        return 0;
    }

    @Override
    public String cudaGetErrorString(int error) {
        switch (error) {
            case 0: return "no error";
            case 1: return "invalid argument";
            case 2: return "out of memory";
            case 101: return "invalid device ordinal";
            case 600: return "device not ready";
            default: return "cuda error " + error;
        }
    }

    @Override
    public int cudaStreamQuery(long stream) {
        return hung ? NcclConstants.CUDA_ERROR_NOT_READY : 0;
    }

    @Override
    public int cudaStreamIsCapturing(long stream, int[] out) {
        out[0] = capturing.getOrDefault(stream, false) ? 1 : 0;
        return 0;
    }

    @Override
    public int cudaMemcpyHost(long device, ByteBuffer host, boolean toDevice) {
        log("cudaMemcpyHost");
        int f = injected("cudaMemcpyHost");
        if (f != 0) {
            return f;
        }
        ByteBuffer d = at(device, host.remaining());
        if (d == null || !host.isDirect()) {
            return NcclConstants.CUDA_ERROR_INVALID_VALUE;
        }
        if (toDevice) {
            d.put(host.duplicate());
        } else {
            host.duplicate().put(d);
        }
        return 0;
    }

    @Override
    public int cudaMemcpyAsync(long dst, long src, long bytes, long stream) {
        log("cudaMemcpyAsync@" + stream);
        ByteBuffer d = at(dst, bytes);
        ByteBuffer s = at(src, bytes);
        if (d == null || s == null) {
            return NcclConstants.CUDA_ERROR_INVALID_VALUE;
        }
        d.put(s);
        return 0;
    }

    @Override
    public int cudaMemcpy2DAsync(long dst, long dpitch, long src, long spitch, long width, long height, long stream) {
        log("cudaMemcpy2DAsync@" + stream);
        if (width > dpitch || width > spitch) {
            return NcclConstants.CUDA_ERROR_INVALID_VALUE;
        }
        for (long row = 0; row < height; row++) {
            ByteBuffer d = at(dst + row * dpitch, width);
            ByteBuffer s = at(src + row * spitch, width);
            if (d == null || s == null) {
                return NcclConstants.CUDA_ERROR_INVALID_VALUE;
            }
            d.put(s);
        }
        return 0;
    }

    @Override
    public int cudaMallocAsync(long[] out, long bytes, long stream) {
        log("cudaMallocAsync@" + stream);
        int f = injected("cudaMallocAsync");
        if (f != 0) {
            return f;
        }
        out[0] = malloc(bytes);
        return 0;
    }

    @Override
    public int cudaFreeAsync(long ptr, long stream) {
        log("cudaFreeAsync@" + stream);
        return freeMem(ptr) ? 0 : NcclConstants.CUDA_ERROR_INVALID_VALUE;
    }

    @Override
    public int cudaEventCreate(long[] out) {
        long e = nextEvent.getAndIncrement();
        eventPending.put(e, false);
        out[0] = e;
        return 0;
    }

    @Override
    public int cudaEventRecord(long event, long stream) {
        log("cudaEventRecord@" + stream);
        if (!eventPending.containsKey(event)) {
            return NcclConstants.CUDA_ERROR_INVALID_VALUE;
        }
        eventPending.put(event, hung);
        return 0;
    }

    @Override
    public int cudaEventQuery(long event) {
        Boolean p = eventPending.get(event);
        if (p == null) {
            return NcclConstants.CUDA_ERROR_INVALID_VALUE;
        }
        return p ? NcclConstants.CUDA_ERROR_NOT_READY : 0;
    }

    @Override
    public int cudaEventDestroy(long event) {
        return eventPending.remove(event) != null ? 0 : NcclConstants.CUDA_ERROR_INVALID_VALUE;
    }

    private static void sleep(Duration d) {
        if (d.isZero()) {
            return;
        }
        try {
            Thread.sleep(d.toMillis());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ---- communicators ----

    /** The ranks of one communicator (one unique id) and their meeting point. */
    private final class Group {
        final byte[] id;
        final int nranks;
        final Comm[] members;
        int joined;
        // collective rendezvous
        final Object[] slots;
        final String[] signatures;
        int arrived;
        long generation;
        List<Object> lastResult = List.of();
        String lastMismatch;
        final Map<String, LinkedBlockingQueue<byte[]>> mailboxes = new HashMap<>();

        Group(byte[] id, int nranks) {
            this.id = id;
            this.nranks = nranks;
            this.members = new Comm[nranks];
            this.slots = new Object[nranks];
            this.signatures = new String[nranks];
        }

        synchronized LinkedBlockingQueue<byte[]> mailbox(int src, int dst) {
            return mailboxes.computeIfAbsent(src + ">" + dst, k -> new LinkedBlockingQueue<>());
        }

        /** Every rank's contribution, or null on timeout/abort; a signature mismatch sets lastMismatch. */
        synchronized List<Object> exchange(int rank, String signature, Object value) {
            long gen = generation;
            slots[rank] = value;
            signatures[rank] = signature;
            arrived++;
            if (arrived == nranks) {
                lastMismatch = null;
                for (String s : signatures) {
                    if (!s.equals(signatures[0])) {
                        lastMismatch = Arrays.toString(signatures);
                    }
                }
                lastResult = Arrays.asList(slots.clone());
                Arrays.fill(slots, null);
                arrived = 0;
                generation++;
                notifyAll();
                return lastResult;
            }
            long end = System.nanoTime() + timeout.toNanos();
            while (generation == gen) {
                long left = end - System.nanoTime();
                boolean anyAborted = false;
                for (Comm m : members) {
                    anyAborted |= m != null && m.aborted;
                }
                if (left <= 0 || anyAborted) {
                    return null;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(this, Math.min(left, TimeUnit.MILLISECONDS.toNanos(50)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return null;
                }
            }
            return lastResult;
        }
    }

    private static DType dtype(int datatype) {
        switch (datatype) {
            case NcclConstants.INT8: return DType.I8;
            case NcclConstants.UINT8: return DType.U8;
            case NcclConstants.INT32: return DType.I32;
            case NcclConstants.INT64: return DType.I64;
            case NcclConstants.FLOAT16: return DType.F16;
            case NcclConstants.FLOAT32: return DType.F32;
            case NcclConstants.FLOAT64: return DType.F64;
            case NcclConstants.BFLOAT16: return DType.BF16;
            default: return null;
        }
    }

    private static ReduceOp op(int op) {
        switch (op) {
            case NcclConstants.OP_SUM: return ReduceOp.SUM;
            case NcclConstants.OP_PROD: return ReduceOp.PROD;
            case NcclConstants.OP_MAX: return ReduceOp.MAX;
            case NcclConstants.OP_MIN: return ReduceOp.MIN;
            case NcclConstants.OP_AVG: return ReduceOp.AVG;
            default: return null;
        }
    }

    private static byte[] bytes(ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return out;
    }

    /** One rank's communicator. */
    private final class Comm implements NcclComm {
        final Group group;
        final int rank;
        final int device;
        volatile int asyncError;
        volatile boolean aborted;

        Comm(Group group, int rank, int device) {
            this.group = group;
            this.rank = rank;
            this.device = device;
        }

        private int enter(String call, long stream) {
            log(call + "@" + stream);
            if (aborted) {
                violations.add(call + " on rank " + rank + " after ncclCommAbort");
                return NcclConstants.INTERNAL_ERROR;
            }
            return injected(call);
        }

        private int collective(String call, String signature, byte[] contribution, java.util.function.Function<List<Object>, Integer> finish) {
            List<Object> all = group.exchange(rank, signature, contribution);
            if (all == null) {
                return NcclConstants.REMOTE_ERROR;
            }
            if (group.lastMismatch != null) {
                lastError = call + " called with different arguments across ranks: " + group.lastMismatch;
                return NcclConstants.INVALID_USAGE;
            }
            return finish.apply(all);
        }

        @Override
        public int allReduce(long send, long recv, long count, int datatype, int op, long stream) {
            int f = enter("ncclAllReduce", stream);
            if (f != 0) {
                return f;
            }
            DType t = dtype(datatype);
            ReduceOp o = op(op);
            if (t == null || o == null) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            ByteBuffer s = at(send, count * t.byteSize());
            ByteBuffer r = at(recv, count * t.byteSize());
            if (s == null || r == null) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            byte[] mine = bytes(s);
            return dispatch(false, () -> collective("ncclAllReduce", "allReduce " + count + " " + datatype + " " + op, mine, all -> {
                List<byte[]> parts = new ArrayList<>();
                all.forEach(x -> parts.add((byte[]) x));
                r.duplicate().put(HostReduce.reduce(t, o, parts, count));
                return 0;
            }));
        }

        @Override
        public int allGather(long send, long recv, long count, int datatype, long stream) {
            int f = enter("ncclAllGather", stream);
            if (f != 0) {
                return f;
            }
            DType t = dtype(datatype);
            if (t == null) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            ByteBuffer s = at(send, count * t.byteSize());
            ByteBuffer r = at(recv, count * t.byteSize() * group.nranks);
            if (s == null || r == null) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            byte[] mine = bytes(s);
            return dispatch(false, () -> collective("ncclAllGather", "allGather " + count + " " + datatype, mine, all -> {
                ByteBuffer d = r.duplicate();
                all.forEach(x -> d.put((byte[]) x));
                return 0;
            }));
        }

        @Override
        public int reduceScatter(long send, long recv, long recvCount, int datatype, int op, long stream) {
            int f = enter("ncclReduceScatter", stream);
            if (f != 0) {
                return f;
            }
            DType t = dtype(datatype);
            ReduceOp o = op(op);
            if (t == null || o == null) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            long part = recvCount * t.byteSize();
            ByteBuffer s = at(send, part * group.nranks);
            ByteBuffer r = at(recv, part);
            if (s == null || r == null) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            byte[] mine = bytes(s);
            return dispatch(false, () -> collective("ncclReduceScatter", "reduceScatter " + recvCount + " " + datatype + " " + op,
                    mine, all -> {
                        List<byte[]> parts = new ArrayList<>();
                        all.forEach(x -> parts.add((byte[]) x));
                        byte[] red = HostReduce.reduce(t, o, parts, recvCount * group.nranks);
                        r.duplicate().put(red, (int) (rank * part), (int) part);
                        return 0;
                    }));
        }

        @Override
        public int broadcast(long send, long recv, long count, int datatype, int root, long stream) {
            int f = enter("ncclBroadcast", stream);
            if (f != 0) {
                return f;
            }
            DType t = dtype(datatype);
            if (t == null || root < 0 || root >= group.nranks) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            ByteBuffer s = at(send, count * t.byteSize());
            ByteBuffer r = at(recv, count * t.byteSize());
            if (s == null || r == null) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            byte[] mine = rank == root ? bytes(s) : null;
            return dispatch(false, () -> collective("ncclBroadcast", "broadcast " + count + " " + datatype + " " + root, mine, all -> {
                r.duplicate().put((byte[]) all.get(root));
                return 0;
            }));
        }

        @Override
        public int send(long buf, long count, int datatype, int peer, long stream) {
            int f = enter("ncclSend", stream);
            if (f != 0) {
                return f;
            }
            DType t = dtype(datatype);
            if (t == null || peer < 0 || peer >= group.nranks) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            ByteBuffer b = at(buf, count * t.byteSize());
            if (b == null) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            return dispatch(true, () -> {
                group.mailbox(rank, peer).add(bytes(b));
                return 0;
            });
        }

        @Override
        public int recv(long buf, long count, int datatype, int peer, long stream) {
            int f = enter("ncclRecv", stream);
            if (f != 0) {
                return f;
            }
            DType t = dtype(datatype);
            if (t == null || peer < 0 || peer >= group.nranks) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            ByteBuffer b = at(buf, count * t.byteSize());
            if (b == null) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            if (peer == rank && groupDepth.get()[0] == 0) {
                violations.add("recv from self outside a group call would hang");
            }
            return dispatch(false, () -> {
                try {
                    byte[] got = group.mailbox(peer, rank).poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
                    if (got == null || aborted) {
                        return NcclConstants.REMOTE_ERROR;
                    }
                    if (got.length != b.capacity()) {
                        lastError = "message of " + got.length + " bytes truncated into " + b.capacity();
                        return NcclConstants.INVALID_USAGE;
                    }
                    b.duplicate().put(got);
                    return 0;
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return NcclConstants.SYSTEM_ERROR;
                }
            });
        }

        @Override
        public int getAsyncError(int[] out) {
            if (aborted) {
                violations.add("ncclCommGetAsyncError on rank " + rank + " after ncclCommAbort");
            }
            out[0] = asyncError;
            return 0;
        }

        @Override
        public String getLastError() {
            return lastError;
        }

        @Override
        public int finalizeComm() {
            return 0;
        }

        @Override
        public int destroy() {
            aborted = true;
            return 0;
        }

        /**
         * {@code ncclCommShrink}: a new group of the other ranks (keyed by this group's id and the
         * excluded ranks), joined like {@code ncclCommInitRank}; refused on a library older than 2.27.
         * This communicator stays valid until it is aborted.
         */
        @Override
        public int shrink(int[] excludeRanks, NcclComm[] out, int flags) {
            log("ncclCommShrink");
            if (version < NcclConstants.SHRINK_MIN_VERSION_CODE) {
                violations.add("ncclCommShrink on NCCL " + NcclConstants.versionString(version) + ", which lacks it");
                return NcclConstants.INVALID_USAGE;
            }
            if (aborted) {
                violations.add("ncclCommShrink on rank " + rank + " after ncclCommAbort");
                return NcclConstants.INVALID_USAGE;
            }
            int f = injected("ncclCommShrink");
            if (f != 0) {
                return f;
            }
            if (flags != NcclConstants.SHRINK_DEFAULT && flags != NcclConstants.SHRINK_ABORT) {
                return NcclConstants.INVALID_ARGUMENT;
            }
            int below = 0;
            for (int e : excludeRanks) {
                if (e < 0 || e >= group.nranks || e == rank) {
                    return NcclConstants.INVALID_ARGUMENT;
                }
                if (e < rank) {
                    below++;
                }
            }
            synchronized (group) {
                group.notifyAll(); // NCCL_SHRINK_ABORT: operations in flight on this communicator give up
            }
            int[] sorted = excludeRanks.clone();
            Arrays.sort(sorted);
            byte[] id = ("shrink " + Arrays.toString(group.id) + " without " + Arrays.toString(sorted))
                    .getBytes(java.nio.charset.StandardCharsets.UTF_8);
            return join(out, id, group.nranks - excludeRanks.length, rank - below, device);
        }

        @Override
        public int abort() {
            log("ncclCommAbort");
            if (aborted) {
                violations.add("ncclCommAbort twice on rank " + rank);
            }
            sleep(abortDelay);
            aborted = true;
            synchronized (group) {
                group.notifyAll();
            }
            return 0;
        }
    }
}
