package io.jcomm.mq.testing;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.work.Work;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Test-only stand-in of a CPU group for ranks that are threads of one JVM: barrier and the object
 * collectives only (values pass through the codec, as over a wire). Everything else throws
 * {@link UnsupportedOperationException}. Used until the real CPU group is available to the tests.
 */
public final class ThreadGroupStandIn implements ProcessGroup {

    /** What the ranks of one stand-in group share. */
    public static final class Board {
        private final int size;
        private final Map<Long, Object[]> slots = new HashMap<>();
        private final Map<Long, Integer> arrived = new HashMap<>();

        public Board(int size) {
            this.size = size;
        }

        synchronized List<Object> exchange(long round, int rank, Object value, Duration timeout, String group) {
            Object[] s = slots.computeIfAbsent(round, k -> new Object[size]);
            s[rank] = value;
            arrived.merge(round, 1, Integer::sum);
            notifyAll();
            long end = System.nanoTime() + timeout.toNanos();
            while (arrived.get(round) < size) {
                long left = end - System.nanoTime();
                if (left <= 0) {
                    throw new CommTimeoutException(OpContext.of(group, rank, "exchange"), "round " + round + " timed out");
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(this, left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new CommTimeoutException(OpContext.of(group, rank, "exchange"), "interrupted");
                }
            }
            List<Object> out = new ArrayList<>(size);
            for (Object o : s) {
                out.add(o);
            }
            return out;
        }
    }

    private final Board board;
    private final String name;
    private final int rank;
    private final ObjectCodec codec;
    private final Duration timeout;
    private long round;

    public ThreadGroupStandIn(Board board, String name, int rank, ObjectCodec codec, Duration timeout) {
        this.board = board;
        this.name = name;
        this.rank = rank;
        this.codec = codec;
        this.timeout = timeout;
    }

    @Override public String name() { return name; }
    @Override public int rank() { return rank; }
    @Override public int size() { return board.size; }

    @Override
    public List<Integer> globalRanks() {
        List<Integer> l = new ArrayList<>();
        for (int i = 0; i < board.size; i++) {
            l.add(i);
        }
        return l;
    }

    @Override public String backendName() { return "threads"; }
    @Override public Duration defaultTimeout() { return timeout; }
    @Override public ObjectCodec codec() { return codec; }

    @Override
    public void barrier(Duration t) {
        board.exchange(round++, rank, Boolean.TRUE, t, name);
    }

    @Override
    public <T> T broadcastObject(T value, int src, Class<T> type, Duration t) {
        List<Object> all = board.exchange(round++, rank, rank == src ? codec.encode(value) : null, t, name);
        return codec.decode((byte[]) all.get(src), type);
    }

    @Override
    public <T> List<T> allGatherObject(T value, Class<T> type, Duration t) {
        List<Object> all = board.exchange(round++, rank, codec.encode(value), t, name);
        List<T> out = new ArrayList<>();
        for (Object o : all) {
            out.add(codec.decode((byte[]) o, type));
        }
        return out;
    }

    @Override
    public <T> List<T> gatherObject(T value, int dst, Class<T> type, Duration t) {
        List<T> all = allGatherObject(value, type, t);
        return rank == dst ? all : List.of();
    }

    private static UnsupportedOperationException no() {
        return new UnsupportedOperationException("not part of the test stand-in");
    }

    @Override public void broadcast(Tensor tensor, int src, Duration t) { throw no(); }
    @Override public void allReduce(Tensor tensor, ReduceOp op, Duration t) { throw no(); }
    @Override public void allGather(Tensor output, Tensor input, Duration t) { throw no(); }
    @Override public void allGatherV(Tensor output, Tensor input, long[] counts, Duration t) { throw no(); }
    @Override public void gather(Tensor output, Tensor input, int dst, Duration t) { throw no(); }
    @Override public void scatter(Tensor output, Tensor input, int src, Duration t) { throw no(); }
    @Override public void reduceScatter(Tensor output, Tensor input, ReduceOp op, Duration t) { throw no(); }
    @Override public void send(Tensor tensor, int dst, int tag, Duration t) { throw no(); }
    @Override public void recv(Tensor tensor, int src, int tag, Duration t) { throw no(); }
    @Override public void sendObject(Object value, int dst, Duration t) { throw no(); }
    @Override public <T> T recvObject(int src, Class<T> type, Duration t) { throw no(); }
    @Override public Work<Void> barrierAsync(Duration t) { throw no(); }
    @Override public Work<Void> broadcastAsync(Tensor tensor, int src, Duration t) { throw no(); }
    @Override public Work<Void> allReduceAsync(Tensor tensor, ReduceOp op, Duration t) { throw no(); }
    @Override public Work<Void> allGatherAsync(Tensor output, Tensor input, Duration t) { throw no(); }
    @Override public Work<Void> reduceScatterAsync(Tensor output, Tensor input, ReduceOp op, Duration t) { throw no(); }
    @Override public Work<Void> sendAsync(Tensor tensor, int dst, int tag, Duration t) { throw no(); }
    @Override public Work<Void> recvAsync(Tensor tensor, int src, int tag, Duration t) { throw no(); }
    @Override public boolean isPoisoned() { return false; }
    @Override public void close() { }
}
