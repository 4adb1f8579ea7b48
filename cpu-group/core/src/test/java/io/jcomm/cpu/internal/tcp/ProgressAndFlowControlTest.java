package io.jcomm.cpu.internal.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DType;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.cpu.internal.DefaultProcessGroup;
import io.jcomm.cpu.internal.OpCodes;
import io.jcomm.cpu.testkit.CpuGroupCases;
import io.jcomm.cpu.testkit.ThreadRanks;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The tcp backend's progress and flow control, with ranks as threads (the multi-JVM behaviour is
 * covered by the integration tests): bytes a finished call left behind move without the caller,
 * a sender stays within its per-peer budget, an over-budget sender times out naming the slow peer,
 * and a stranger's bytes on a listener never reach the group.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ProgressAndFlowControlTest {

    private static final Duration T = Duration.ofSeconds(30);

    private static CpuGroupOptions.Builder opts(String name) {
        return CpuGroupOptions.builder().backend("tcp").groupName(name).timeout(T).codec(CpuGroupCases.codec())
                .option("tcp.shm", "false");
    }

    private static Engine engine(ProcessGroup g) {
        return ((TcpBackend) ((DefaultProcessGroup) g).backend()).engine();
    }

    /**
     * Rank 0 sends many messages through a small socket buffer and then stops calling into the group;
     * what the socket could not take at once must still reach rank 1 (it used to wait in rank 0's
     * outbound buffer until rank 0 entered the group again, i.e. for ever).
     */
    @Test
    void bytesLeftBehindByAFinishedSendReachTheReceiverWithoutTheSendersHelp() throws Exception {
        int messages = 400;
        int elems = 4096; // 16 KiB each, 6.4 MiB in all: far beyond the socket buffers
        CountDownLatch received = new CountDownLatch(1);
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts("leftbehind").option("tcp.socketBufferBytes", "16384")
                .option("tcp.sendBudgetBytes", String.valueOf(64 << 20)), T)) {
            t.run(g -> {
                Tensor x = Tensor.allocate(DType.F32, elems);
                if (g.rank() == 0) {
                    for (int m = 0; m < messages; m++) {
                        x.fill(m);
                        g.send(x, 1, 0);
                    }
                    assertTrue(engine(g).links[1].inFlightBytes() > 0, "the sender finished ahead of the receiver");
                    // never enters the group again until the receiver has everything
                    assertTrue(received.await(20, TimeUnit.SECONDS), "rank 1 did not receive everything");
                } else {
                    Thread.sleep(200); // let the sender finish first
                    for (int m = 0; m < messages; m++) {
                        g.recv(x, 0, 0);
                        assertEquals(m, x.getDouble(elems - 1), 0.0);
                        assertEquals(m, x.getDouble(0), 0.0);
                    }
                    received.countDown();
                }
            }, Duration.ofSeconds(60));
        }
    }

    /**
     * A sender far ahead of a slow receiver: what it has sent and the receiver has not consumed never
     * exceeds the budget (plus one message), what the receiver buffers for it neither, and the sender
     * is held back to the receiver's pace.
     */
    @Test
    void aSenderAheadOfASlowReceiverStaysWithinItsBudget() throws Exception {
        int budget = 64 << 10;
        int messages = 300;
        int bytes = 4096;
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts("budget").option("tcp.sendBudgetBytes", String.valueOf(budget)), T)) {
            List<Long> result = t.call(g -> {
                Engine e = engine(g);
                Tensor x = Tensor.allocate(DType.U8, bytes);
                long maxSeen = 0;
                long t0 = System.nanoTime();
                try {
                    if (g.rank() == 0) {
                        for (int m = 0; m < messages; m++) {
                            x.fill(m & 0x7f);
                            g.send(x, 1, 0);
                            maxSeen = Math.max(maxSeen, e.links[1].inFlightBytes());
                        }
                    } else {
                        for (int m = 0; m < messages; m++) {
                            Thread.sleep(2);
                            g.recv(x, 0, 0);
                            assertEquals(m & 0x7f, x.getDouble(bytes - 1), 0.0);
                            maxSeen = Math.max(maxSeen, e.early.bytes());
                        }
                    }
                } catch (InterruptedException ie) {
                    throw new AssertionError(ie);
                }
                long elapsedMs = (System.nanoTime() - t0) / 1_000_000;
                return maxSeen * 100_000 + elapsedMs;
            }, Duration.ofSeconds(60));
            long senderMax = result.get(0) / 100_000;
            long receiverMax = result.get(1) / 100_000;
            long senderMs = result.get(0) % 100_000;
            long receiverMs = result.get(1) % 100_000;
            long oneMessage = Frame.SIZE + bytes;
            assertTrue(senderMax <= budget, "sender had " + senderMax + " bytes unconsumed, budget " + budget);
            assertTrue(senderMax > budget / 2, "the budget was never approached (" + senderMax + "): the test tests nothing");
            assertTrue(receiverMax <= budget + oneMessage, "receiver buffered " + receiverMax + " bytes for the sender");
            // unthrottled the sender would finish in a few ms; with 64 KiB of credit it can be at most
            // ~16 messages (~32 ms of the receiver's pace) ahead
            assertTrue(senderMs >= receiverMs - 200, "sender " + senderMs + " ms, receiver " + receiverMs + " ms");
        }
    }

    /**
     * Small messages: the message budget, not the byte budget, holds the sender back, so a pipeline of
     * small steps runs at most that many messages ahead of its consumer.
     */
    @Test
    void smallMessagesAreBoundedByTheMessageBudget() {
        int budget = 8;
        int messages = 200;
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts("msgbudget").option("tcp.sendBudgetMessages", String.valueOf(budget)), T)) {
            List<Integer> maxSeen = t.call(g -> {
                Engine e = engine(g);
                Tensor x = Tensor.allocate(DType.I32, 4);
                int max = 0;
                try {
                    for (int m = 0; m < messages; m++) {
                        if (g.rank() == 0) {
                            x.fill(m);
                            g.send(x, 1, 0);
                            max = Math.max(max, e.links[1].inFlightMessages());
                        } else {
                            Thread.sleep(1);
                            g.recv(x, 0, 0);
                            assertEquals(m, x.getDouble(3), 0.0);
                        }
                    }
                } catch (InterruptedException ie) {
                    throw new AssertionError(ie);
                }
                return max;
            }, Duration.ofSeconds(60));
            assertTrue(maxSeen.get(0) <= budget, "sender had " + maxSeen.get(0) + " messages unconsumed, budget " + budget);
            assertTrue(maxSeen.get(0) >= budget / 2, "the budget was never approached: " + maxSeen.get(0));
        }
    }

    /**
     * Traffic both ways (barriers, all-reduces) returns credit on the data messages themselves: no
     * CREDIT frame is needed and nothing stays outstanding.
     */
    @Test
    void trafficBothWaysNeedsNoCreditFrames() {
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts("bothways"), T)) {
            List<Long> frames = t.call(g -> {
                Tensor x = Tensor.allocate(DType.F32, 256);
                for (int i = 0; i < 2000; i++) {
                    g.barrier();
                    x.fill(1);
                    g.allReduce(x, ReduceOp.SUM);
                    assertEquals(2.0, x.getDouble(255), 0.0);
                }
                Link l = engine(g).links[1 - g.rank()];
                assertTrue(l.inFlightMessages() <= 2, "outstanding: " + l.inFlightMessages());
                return l.creditFrames();
            }, Duration.ofSeconds(60));
            assertEquals(List.of(0L, 0L), frames);
        }
    }

    /** A receiver that is alive but never receives: the sender fails at its deadline, naming it. */
    @Test
    void aSenderOverBudgetTimesOutNamingTheSlowPeer() {
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts("slowpeer").option("tcp.sendBudgetBytes", "8192"), T)) {
            CountDownLatch done = new CountDownLatch(1);
            t.run(g -> {
                if (g.rank() == 0) {
                    Tensor x = Tensor.allocate(DType.U8, 1000);
                    CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> {
                        for (int m = 0; m < 100; m++) {
                            g.send(x, 1, 0, Duration.ofMillis(500));
                        }
                    });
                    String msg = e.getMessage();
                    assertTrue(msg.contains("wait for credit from rank 1") && msg.contains("tcp.sendBudgetBytes"), msg);
                    done.countDown();
                } else {
                    assertTrue(done.await(30, TimeUnit.SECONDS));
                }
            }, Duration.ofSeconds(60));
        }
    }

    /**
     * Connections to a rank's listener during group creation that send an ABORT, other control frames
     * or garbage first are dropped; the group is created and works, and no stranger's byte appears in
     * any exception.
     */
    @Test
    void strangersOnTheListenerNeverReachTheGroup() throws Exception {
        InMemoryStore store = new InMemoryStore(T);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        List<ProcessGroup> groups = new ArrayList<>();
        try {
            Future<ProcessGroup> g0 = pool.submit(() -> CpuGroups.create(opts("strangers").store(store).rank(0).size(2).build()));
            byte[] addr = store.get("strangers/tcp/1/rank/0", T);
            String[] parts = new String(addr, StandardCharsets.UTF_8).split(" ");
            String host = parts[0];
            int port = Integer.parseInt(parts[1]);
            List<Socket> strangers = new ArrayList<>();
            strangers.add(send(host, port, frame(Frame.ABORT, Frame.ABORT_FAILURE, "STRANGER SAYS ABORT")));
            strangers.add(send(host, port, frame(Frame.READY, 0, null)));
            strangers.add(send(host, port, frame(Frame.BYE, 0, null)));
            strangers.add(send(host, port, frame(Frame.CREDIT, 0, null)));
            strangers.add(send(host, port, frame(Frame.DATA, OpCodes.BARRIER, null)));
            strangers.add(send(host, port, "GET / HTTP/1.1\r\nHost: x\r\n\r\nSTRANGER".getBytes(StandardCharsets.US_ASCII)));
            Thread.sleep(100);
            Future<ProcessGroup> g1 = pool.submit(() -> CpuGroups.create(opts("strangers").store(store).rank(1).size(2).build()));
            groups.add(g0.get(30, TimeUnit.SECONDS));
            groups.add(g1.get(30, TimeUnit.SECONDS));
            List<Future<Double>> sums = new ArrayList<>();
            for (ProcessGroup g : groups) {
                sums.add(pool.submit(() -> {
                    Tensor x = Tensor.allocate(DType.F32, 16);
                    x.fill(g.rank() + 1);
                    g.allReduce(x, ReduceOp.SUM);
                    g.barrier();
                    return x.getDouble(15);
                }));
            }
            for (Future<Double> s : sums) {
                assertEquals(3.0, s.get(30, TimeUnit.SECONDS), 0.0);
            }
            for (ProcessGroup g : groups) {
                assertFalse(g.isPoisoned(), g + " was poisoned");
            }
            for (Socket s : strangers) {
                s.close();
            }
        } finally {
            for (ProcessGroup g : groups) {
                g.close();
            }
            pool.shutdownNow();
            store.close();
        }
    }

    private static Socket send(String host, int port, byte[] bytes) throws Exception {
        Socket s = new Socket(host, port);
        OutputStream out = s.getOutputStream();
        out.write(bytes);
        out.flush();
        return s;
    }

    /** A well-formed frame of {@code kind} with an optional text payload. */
    private static byte[] frame(int kind, int op, String payload) {
        byte[] p = payload == null ? new byte[0] : payload.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(Frame.SIZE + p.length).order(ByteOrder.LITTLE_ENDIAN);
        b.put(Frame.MAGIC).put((byte) kind).put((byte) op).put((byte) 0).put((byte) 0).put((byte) 0).put((byte) 0)
                .put((byte) 0).putLong(1).putLong(1 << 20).putInt(0).putInt(0).putInt(p.length).putInt(0).put(p);
        return b.array();
    }
}
