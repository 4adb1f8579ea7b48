package io.jcomm.device.testkit;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.UnsupportedByBackendException;
import io.jcomm.api.work.CompletableWork;
import io.jcomm.api.work.Work;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A test stand-in for the CPU {@link ProcessGroup} whose ranks are threads of one JVM, for unit tests
 * of logic that needs a control plane (the NCCL unique-id exchange, the CPU device communicator)
 * without sockets. Collectives meet in a shared exchange bounded by a deadline. It is deliberately
 * strict where real transports may be: a tensor send blocks until the receiver took the message
 * (rendezvous), and the asynchronous variants of one rank run one at a time in call order, so code
 * that only works with buffered or concurrent point-to-point fails here. Objects are passed by
 * reference (no codec). Not a substitute for the real CPU group in distributed tests.
 */
public final class ThreadRanksGroup implements ProcessGroup {

    private final Fabric fabric;
    private final int rank;

    private ThreadRanksGroup(Fabric fabric, int rank) {
        this.fabric = fabric;
        this.rank = rank;
    }

    /** One group handle per rank, sharing an in-memory fabric. */
    public static List<ThreadRanksGroup> create(String name, int size, Duration timeout) {
        return create(name, size, timeout, true);
    }

    /**
     * The same; without {@code allToAll}, the group refuses allToAll and allToAllV with
     * {@link UnsupportedByBackendException} like a backend that lacks them.
     */
    public static List<ThreadRanksGroup> create(String name, int size, Duration timeout, boolean allToAll) {
        Fabric f = new Fabric(name, size, timeout, allToAll);
        List<ThreadRanksGroup> out = new ArrayList<>();
        for (int r = 0; r < size; r++) {
            out.add(new ThreadRanksGroup(f, r));
        }
        return List.copyOf(out);
    }

    private static final class Fabric {
        final String name;
        final int size;
        final Duration timeout;
        final boolean allToAll;
        final ReentrantLock lock = new ReentrantLock();
        final Condition changed = lock.newCondition();
        final Object[] slots;
        int arrived;
        long generation;
        List<Object> lastResult = List.of();
        final Map<String, LinkedBlockingQueue<Object>> mailboxes = new ConcurrentHashMap<>();
        final ExecutorService[] async;
        volatile CommException poison;
        /** Global rank of each rank; the group's generation ({@link ThreadRanksGroup#shrink}). */
        final List<Integer> ranks;
        final int epoch;
        /** The fabrics made by shrinks of this one, by excluded ranks. */
        final Map<String, Fabric> successors = new ConcurrentHashMap<>();

        Fabric(String name, int size, Duration timeout, boolean allToAll) {
            this(name, size, timeout, allToAll, null, 0);
        }

        Fabric(String name, int size, Duration timeout, boolean allToAll, List<Integer> ranks, int epoch) {
            this.ranks = ranks;
            this.epoch = epoch;
            this.name = name;
            this.size = size;
            this.timeout = timeout;
            this.allToAll = allToAll;
            this.slots = new Object[size];
            this.async = new ExecutorService[size];
            for (int r = 0; r < size; r++) {
                int rank = r;
                async[r] = Executors.newSingleThreadExecutor(run -> {
                    Thread t = new Thread(run, "thread-ranks-async-" + name + "-" + rank);
                    t.setDaemon(true);
                    return t;
                });
            }
        }

        LinkedBlockingQueue<Object> mailbox(int src, int dst, int tag) {
            return mailboxes.computeIfAbsent(src + ">" + dst + "#" + tag, k -> new LinkedBlockingQueue<>());
        }
    }

    private OpContext ctx(String op) {
        return OpContext.of(fabric.name, rank, op);
    }

    /** Every rank's contribution, in rank order; blocks until all arrived or the deadline passes (then poisons). */
    private List<Object> exchange(String op, Object value, Duration timeout) {
        checkOpen(op);
        Deadline d = Deadline.after(timeout);
        fabric.lock.lock();
        try {
            long gen = fabric.generation;
            fabric.slots[rank] = value;
            fabric.arrived++;
            if (fabric.arrived == fabric.size) {
                fabric.lastResult = Arrays.asList(fabric.slots.clone());
                Arrays.fill(fabric.slots, null);
                fabric.arrived = 0;
                fabric.generation++;
                fabric.changed.signalAll();
                return fabric.lastResult;
            }
            while (fabric.generation == gen) {
                if (fabric.poison != null) {
                    throw new CommClosedException(ctx(op), "group failed: " + fabric.poison.getMessage(), fabric.poison);
                }
                long left = d.remainingNanos();
                if (left <= 0) {
                    CommTimeoutException e = new CommTimeoutException(ctx(op), "not every rank arrived within " + timeout);
                    fabric.poison = e;
                    fabric.changed.signalAll();
                    throw e;
                }
                try {
                    fabric.changed.awaitNanos(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new CommClosedException(ctx(op), "interrupted", e);
                }
            }
            return fabric.lastResult;
        } finally {
            fabric.lock.unlock();
        }
    }

    private void checkOpen(String op) {
        CommException p = fabric.poison;
        if (p != null) {
            throw new CommClosedException(ctx(op), "group is poisoned: " + p.getMessage(), p);
        }
    }

    private static void checkHost(OpContext c, Tensor t) {
        if (t == null || !t.isHost()) {
            throw c.invalidArgument("needs a host tensor, got " + t);
        }
    }

    private void checkRank(String op, int r) {
        if (r < 0 || r >= fabric.size) {
            throw ctx(op).invalidArgument("rank " + r + " out of range");
        }
    }

    @Override
    public String name() {
        return fabric.name;
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return fabric.size;
    }

    @Override
    public int generation() {
        return fabric.epoch;
    }

    /**
     * The survivors' group: a fabric shared by the ranks that call with the same excluded ranks (ranks
     * that disagree end up on different fabrics and time out: no agreement check here). Poisons this
     * fabric, for every rank, like the abort of a real group that peers notice.
     */
    @Override
    public ProcessGroup shrink(List<Integer> excludedRanks, Duration timeout) {
        OpContext c = ctx("shrink");
        java.util.TreeSet<Integer> ex = new java.util.TreeSet<>();
        for (Integer r : excludedRanks) {
            if (r == null || r < 0 || r >= fabric.size || r == rank || !ex.add(r)) {
                throw c.invalidArgument("bad excluded rank " + r + " in " + excludedRanks);
            }
        }
        List<Integer> global = globalRanks();
        List<Integer> stay = new ArrayList<>();
        for (int r = 0; r < fabric.size; r++) {
            if (!ex.contains(r)) {
                stay.add(global.get(r));
            }
        }
        Fabric next = fabric.successors.computeIfAbsent(ex.toString(),
                k -> new Fabric(fabric.name, stay.size(), fabric.timeout, fabric.allToAll, List.copyOf(stay), fabric.epoch + 1));
        poison(new CommClosedException(c, "aborted: shrinking without ranks " + ex));
        return new ThreadRanksGroup(next, stay.indexOf(global.get(rank)));
    }

    @Override
    public List<Integer> globalRanks() {
        if (fabric.ranks != null) {
            return fabric.ranks;
        }
        List<Integer> l = new ArrayList<>();
        for (int i = 0; i < fabric.size; i++) {
            l.add(i);
        }
        return l;
    }

    @Override
    public String backendName() {
        return "threads";
    }

    @Override
    public Duration defaultTimeout() {
        return fabric.timeout;
    }

    @Override
    public ObjectCodec codec() {
        return new ObjectCodec() {
            @Override
            public byte[] encode(Object value) {
                throw new IllegalArgumentException("the threads-as-ranks stand-in passes objects by reference");
            }

            @Override
            public <T> T decode(byte[] bytes, int offset, int length, Class<T> expected) {
                throw new ProtocolException("the threads-as-ranks stand-in passes objects by reference");
            }
        };
    }

    @Override
    public void barrier(Duration timeout) {
        exchange("barrier", null, timeout);
    }

    @Override
    public void broadcast(Tensor tensor, int src, Duration timeout) {
        checkHost(ctx("broadcast"), tensor);
        checkRank("broadcast", src);
        List<Object> all = exchange("broadcast", rank == src ? tensor.toByteArray() : null, timeout);
        byte[] b = (byte[]) all.get(src);
        if (b.length != tensor.byteSize()) {
            throw new ProtocolException(ctx("broadcast"), "size mismatch " + b.length + " vs " + tensor.byteSize());
        }
        if (rank != src) {
            tensor.buffer().put(b);
        }
    }

    @Override
    public void allReduce(Tensor tensor, ReduceOp op, Duration timeout) {
        checkHost(ctx("allReduce"), tensor);
        List<Object> all = exchange("allReduce", tensor.toByteArray(), timeout);
        List<byte[]> in = new ArrayList<>();
        for (Object o : all) {
            in.add((byte[]) o);
        }
        tensor.buffer().put(HostReduce.reduce(tensor.dtype(), op, in, tensor.numel()));
    }

    @Override
    public void allGather(Tensor output, Tensor input, Duration timeout) {
        checkHost(ctx("allGather"), output);
        checkHost(ctx("allGather"), input);
        if (output.byteSize() != input.byteSize() * fabric.size) {
            throw ctx("allGather").invalidArgument("output size " + output.byteSize());
        }
        concat(output, exchange("allGather", input.toByteArray(), timeout));
    }

    private static void concat(Tensor output, List<Object> parts) {
        var b = output.buffer();
        for (Object o : parts) {
            b.put((byte[]) o);
        }
    }

    @Override
    public void allGatherV(Tensor output, Tensor input, long[] counts, Duration timeout) {
        checkHost(ctx("allGatherV"), output);
        checkHost(ctx("allGatherV"), input);
        concat(output, exchange("allGatherV", input.toByteArray(), timeout));
    }

    @Override
    public void allToAll(Tensor output, Tensor input, Duration timeout) {
        checkHost(ctx("allToAll"), input);
        long[] counts = new long[fabric.size];
        Arrays.fill(counts, input.numel() / fabric.size);
        allToAll("allToAll", output, input, counts, counts, timeout);
    }

    @Override
    public void allToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts, Duration timeout) {
        allToAll("allToAllV", output, input, outputCounts, inputCounts, timeout);
    }

    /** Every rank's input and counts meet in the exchange; each rank copies out the parts addressed to it. */
    private void allToAll(String op, Tensor output, Tensor input, long[] outputCounts, long[] inputCounts,
                          Duration timeout) {
        if (!fabric.allToAll) {
            throw new UnsupportedByBackendException(ctx(op), backendName(), op);
        }
        checkHost(ctx(op), output);
        checkHost(ctx(op), input);
        if (outputCounts.length != fabric.size || inputCounts.length != fabric.size) {
            throw ctx(op).invalidArgument("counts must have one entry per rank");
        }
        List<Object> all = exchange(op, new Object[] {input.toByteArray(), inputCounts.clone()}, timeout);
        int es = output.dtype().byteSize();
        var b = output.buffer();
        for (int i = 0; i < fabric.size; i++) {
            Object[] part = (Object[]) all.get(i);
            byte[] data = (byte[]) part[0];
            long[] counts = (long[]) part[1];
            if (counts[rank] != outputCounts[i]) {
                throw new CollectiveMismatchException(ctx(op), "rank " + i + " sends " + counts[rank]
                        + " elements but this rank expects " + outputCounts[i]);
            }
            long offset = 0;
            for (int j = 0; j < rank; j++) {
                offset += counts[j];
            }
            b.put(data, (int) (offset * es), (int) (counts[rank] * es));
        }
    }

    @Override
    public void gather(Tensor output, Tensor input, int dst, Duration timeout) {
        checkHost(ctx("gather"), input);
        checkRank("gather", dst);
        if (rank == dst) {
            checkHost(ctx("gather"), output);
            if (output.byteSize() != input.byteSize() * fabric.size) {
                throw ctx("gather").invalidArgument("output size " + output.byteSize());
            }
        }
        List<Object> all = exchange("gather", input.toByteArray(), timeout);
        if (rank == dst) {
            concat(output, all);
        }
    }

    @Override
    public void scatter(Tensor output, Tensor input, int src, Duration timeout) {
        checkHost(ctx("scatter"), output);
        checkRank("scatter", src);
        List<Object> all = exchange("scatter", rank == src ? input.toByteArray() : null, timeout);
        byte[] b = (byte[]) all.get(src);
        int part = (int) output.byteSize();
        output.buffer().put(b, rank * part, part);
    }

    @Override
    public void reduceScatter(Tensor output, Tensor input, ReduceOp op, Duration timeout) {
        checkHost(ctx("reduceScatter"), output);
        checkHost(ctx("reduceScatter"), input);
        if (input.numel() != output.numel() * fabric.size) {
            throw ctx("reduceScatter").invalidArgument("input has " + input.numel() + " elements");
        }
        List<Object> all = exchange("reduceScatter", input.toByteArray(), timeout);
        List<byte[]> in = new ArrayList<>();
        for (Object o : all) {
            in.add((byte[]) o);
        }
        byte[] reduced = HostReduce.reduce(input.dtype(), op, in, input.numel());
        int part = (int) output.byteSize();
        output.buffer().put(reduced, rank * part, part);
    }

    /** A tensor message and the latch its receiver opens (rendezvous). */
    private record Message(byte[] data, java.util.concurrent.CountDownLatch taken) {
    }

    @Override
    public void send(Tensor tensor, int dst, int tag, Duration timeout) {
        checkOpen("send");
        checkHost(ctx("send"), tensor);
        checkRank("send", dst);
        Message m = new Message(tensor.toByteArray(), new java.util.concurrent.CountDownLatch(1));
        LinkedBlockingQueue<Object> box = fabric.mailbox(rank, dst, tag);
        box.add(m);
        Deadline d = Deadline.after(timeout);
        try {
            while (!m.taken().await(Math.min(d.remainingNanos(), TimeUnit.MILLISECONDS.toNanos(50)), TimeUnit.NANOSECONDS)) {
                checkOpen("send");
                if (d.isExpired()) {
                    box.remove(m);
                    throw new CommTimeoutException(ctx("send"), "rank " + dst + " did not receive within " + timeout);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CommClosedException(ctx("send"), "interrupted", e);
        }
    }

    @Override
    public void recv(Tensor tensor, int src, int tag, Duration timeout) {
        checkHost(ctx("recv"), tensor);
        checkRank("recv", src);
        Message m = (Message) take(fabric.mailbox(src, rank, tag), "recv", timeout);
        m.taken().countDown();
        byte[] b = m.data();
        if (b.length != tensor.byteSize()) {
            throw new ProtocolException(ctx("recv"), "received " + b.length + " bytes into " + tensor.byteSize());
        }
        tensor.buffer().put(b);
    }

    private Object take(LinkedBlockingQueue<Object> q, String op, Duration timeout) {
        Deadline d = Deadline.after(timeout);
        while (true) {
            checkOpen(op);
            try {
                Object o = q.poll(Math.min(d.remainingNanos(), TimeUnit.MILLISECONDS.toNanos(50)), TimeUnit.NANOSECONDS);
                if (o != null) {
                    return o;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommClosedException(ctx(op), "interrupted", e);
            }
            if (d.isExpired()) {
                throw new CommTimeoutException(ctx(op), "nothing received within " + timeout);
            }
        }
    }

    @Override
    public <T> T broadcastObject(T value, int src, Class<T> type, Duration timeout) {
        checkRank("broadcastObject", src);
        return type.cast(exchange("broadcastObject", value, timeout).get(src));
    }

    @Override
    public <T> List<T> allGatherObject(T value, Class<T> type, Duration timeout) {
        List<T> out = new ArrayList<>();
        for (Object o : exchange("allGatherObject", value, timeout)) {
            out.add(type.cast(o));
        }
        return out;
    }

    @Override
    public <T> List<T> gatherObject(T value, int dst, Class<T> type, Duration timeout) {
        List<T> all = allGatherObject(value, type, timeout);
        return rank == dst ? all : List.of();
    }

    @Override
    public void sendObject(Object value, int dst, Duration timeout) {
        checkRank("sendObject", dst);
        fabric.mailbox(rank, dst, Integer.MIN_VALUE).add(Objects.requireNonNull(value));
    }

    @Override
    public <T> T recvObject(int src, Class<T> type, Duration timeout) {
        return type.cast(take(fabric.mailbox(src, rank, Integer.MIN_VALUE), "recvObject", timeout));
    }

    private Work<Void> async(String op, Duration timeout, Runnable r) {
        CompletableWork<Void> w = new CompletableWork<>(ctx(op), Deadline.after(timeout), null);
        fabric.async[rank].execute(() -> {
            try {
                r.run();
                w.complete(null);
            } catch (RuntimeException e) {
                w.fail(e);
            }
        });
        return w;
    }

    private static Work<Void> now(OpContext c, Runnable r) {
        try {
            r.run();
            return CompletableWork.completed(c, null);
        } catch (RuntimeException e) {
            return CompletableWork.failed(c, e);
        }
    }

    @Override
    public Work<Void> barrierAsync(Duration timeout) {
        return now(ctx("barrier"), () -> barrier(timeout));
    }

    @Override
    public Work<Void> broadcastAsync(Tensor tensor, int src, Duration timeout) {
        return now(ctx("broadcast"), () -> broadcast(tensor, src, timeout));
    }

    @Override
    public Work<Void> allReduceAsync(Tensor tensor, ReduceOp op, Duration timeout) {
        return now(ctx("allReduce"), () -> allReduce(tensor, op, timeout));
    }

    @Override
    public Work<Void> allGatherAsync(Tensor output, Tensor input, Duration timeout) {
        return now(ctx("allGather"), () -> allGather(output, input, timeout));
    }

    @Override
    public Work<Void> reduceScatterAsync(Tensor output, Tensor input, ReduceOp op, Duration timeout) {
        return now(ctx("reduceScatter"), () -> reduceScatter(output, input, op, timeout));
    }

    @Override
    public Work<Void> sendAsync(Tensor tensor, int dst, int tag, Duration timeout) {
        return async("send", timeout, () -> send(tensor, dst, tag, timeout));
    }

    @Override
    public Work<Void> recvAsync(Tensor tensor, int src, int tag, Duration timeout) {
        return async("recv", timeout, () -> recv(tensor, src, tag, timeout));
    }

    @Override
    public boolean isPoisoned() {
        return fabric.poison != null;
    }

    /** Poisons the whole fabric (every rank's later calls fail), like a dead peer would. */
    public void poison(CommException cause) {
        fabric.lock.lock();
        try {
            if (fabric.poison == null) {
                fabric.poison = cause;
            }
            fabric.changed.signalAll();
        } finally {
            fabric.lock.unlock();
        }
    }

    @Override
    public void close() {
        poison(new CommClosedException(ctx("close"), "closed"));
    }
}
