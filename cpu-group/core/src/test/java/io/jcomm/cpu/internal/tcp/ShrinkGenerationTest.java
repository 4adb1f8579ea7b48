package io.jcomm.cpu.internal.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommException;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.internal.DefaultProcessGroup;
import io.jcomm.cpu.testkit.ThreadRanks;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Generations after {@link ProcessGroup#shrink}, on real sockets: bytes of the old generation sent to
 * the new generation's listener (its hello, a hello with the new nonce but the old generation, a data
 * frame without a hello) are refused with a typed reason and do not disturb the new group; a store
 * record of the old generation replayed where the new one's belongs is refused with
 * {@link ProtocolException}.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShrinkGenerationTest {

    private static final Duration T = Duration.ofSeconds(20);

    private static Engine engine(ProcessGroup g) {
        return ((TcpBackend) ((DefaultProcessGroup) g).backend()).engine();
    }

    private static CompletableFuture<ProcessGroup> shrinkAsync(ProcessGroup g, List<Integer> excluded, Duration timeout) {
        CompletableFuture<ProcessGroup> f = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                f.complete(g.shrink(excluded, timeout));
            } catch (Throwable e) {
                f.completeExceptionally(e);
            }
        }, "shrink-" + g.rank());
        t.setDaemon(true);
        t.start();
        return f;
    }

    /** The value of {@code key}, waiting for it up to {@code timeout}. */
    private static String await(InMemoryStore store, String key, Duration timeout) {
        return new String(store.get(key, timeout), StandardCharsets.UTF_8);
    }

    /** Opens a connection to {@code address} and writes {@code frame} to it. */
    private static Socket send(InetSocketAddress address, Frame frame) throws IOException {
        ByteBuf b = Unpooled.buffer(Frame.SIZE);
        frame.writeTo(b);
        byte[] bytes = new byte[Frame.SIZE];
        b.readBytes(bytes);
        b.release();
        Socket s = new Socket();
        s.connect(address, 5000);
        s.setSoTimeout(10_000);
        s.getOutputStream().write(bytes);
        s.getOutputStream().flush();
        return s;
    }

    /** Expects the peer to close {@code s} without answering. */
    private static void expectClosed(Socket s) throws IOException {
        try (s) {
            InputStream in = s.getInputStream();
            try {
                assertEquals(-1, in.read(), "the listener answered a frame of the old generation");
            } catch (SocketException reset) {
                // closed with a reset: refused as well
            }
        }
    }

    private static Frame hello(long receiverNonce, long incarnation, int from, int to, int generation) {
        Frame h = Frame.of(Frame.HELLO, 0, receiverNonce);
        h.count = incarnation;
        h.root = from;
        h.index = to;
        h.creditBytes = generation;
        return h;
    }

    @Test
    void framesOfTheOldGenerationAreRefusedByTheNewOnesListener() throws Exception {
        try (ThreadRanks t = ThreadRanks.start(3, r -> CpuGroupOptions.builder().backend("tcp").timeout(T)
                .groupName("gen"), T)) {
            InMemoryStore store = t.store();
            Engine old0 = engine(t.group(0));
            long oldNonce = old0.nonce;
            long oldIncarnation = old0.generation;
            // rank 0 shrinks first; rank 1's vote is there already (as if rank 1 were slow to connect), so
            // rank 0 listens for new rank 1 (old rank 1) and waits
            String ns = "gen/shrink/" + oldIncarnation + "/1/";
            store.set(ns + "vote/1", "jcomm-shrink gen=1 of=3 excluded=[2]".getBytes(StandardCharsets.UTF_8));
            CompletableFuture<ProcessGroup> f0 = shrinkAsync(t.group(0), List.of(2), T);
            String[] addr = await(store, ns + "tcp/1/rank/0", T).split(" ");
            InetSocketAddress listener = new InetSocketAddress(addr[0], Integer.parseInt(addr[1]));
            long newNonce = Long.parseUnsignedLong(addr[2], 16);

            // 1. the hello old rank 1 sent old rank 0 when the old group formed (same fields, same bytes)
            Socket s1 = send(listener, hello(oldNonce, oldIncarnation, 1, 0, 0));
            // 2. a hello with the new nonce and incarnation, but of generation 0
            Socket s2 = send(listener, hello(newNonce, 1, 1, 0, 0));
            // 3. a data frame of the old group (an all-reduce) without a hello
            Socket s3 = send(listener, Frame.of(Frame.DATA, io.jcomm.cpu.internal.OpCodes.ALLREDUCE, 7).count(1).root(-1));

            // the real rank 1 comes: the new group forms and computes
            CompletableFuture<ProcessGroup> f1 = shrinkAsync(t.group(1), List.of(2), T);
            ProcessGroup n0 = f0.get(30, TimeUnit.SECONDS);
            ProcessGroup n1 = f1.get(30, TimeUnit.SECONDS);
            try {
                expectClosed(s1);
                expectClosed(s2);
                expectClosed(s3);
                assertEquals(1, n0.generation());
                CompletableFuture<Double> r1 = CompletableFuture.supplyAsync(() -> {
                    Tensor x = Tensor.ofFloats(20);
                    n1.allReduce(x, ReduceOp.SUM);
                    return x.getDouble(0);
                });
                Tensor x = Tensor.ofFloats(1);
                n0.allReduce(x, ReduceOp.SUM);
                assertEquals(21.0, x.getDouble(0));
                assertEquals(21.0, r1.get(30, TimeUnit.SECONDS));

                List<CommException> refused = List.copyOf(engine(n0).refusals);
                assertEquals(3, refused.size(), String.valueOf(refused));
                for (CommException e : refused) {
                    assertInstanceOf(ProtocolException.class, e, String.valueOf(e));
                    assertEquals("gen", e.group());
                }
                // in the order the event loop read them: two hellos of generation 0, one frame before a hello
                long generation0 = refused.stream()
                        .filter(e -> e.getMessage().contains("a hello of generation 0 where generation 1 was expected")).count();
                long noHello = refused.stream().filter(e -> e.getMessage().contains("before a hello")).count();
                assertEquals(2, generation0, String.valueOf(refused));
                assertEquals(1, noHello, String.valueOf(refused));
            } finally {
                n0.close();
                n1.close();
            }
        }
    }

    @Test
    void aStoreRecordOfTheOldGenerationReplayedIntoTheNewOneIsRefused() throws Exception {
        try (ThreadRanks t = ThreadRanks.start(3, r -> CpuGroupOptions.builder().backend("tcp").timeout(T)
                .groupName("keys"), T)) {
            InMemoryStore store = t.store();
            long inc0 = engine(t.group(0)).generation;
            CompletableFuture<ProcessGroup> f0 = shrinkAsync(t.group(0), List.of(2), T);
            CompletableFuture<ProcessGroup> f1 = shrinkAsync(t.group(1), List.of(2), T);
            ProcessGroup n0 = f0.get(30, TimeUnit.SECONDS);
            ProcessGroup n1 = f1.get(30, TimeUnit.SECONDS);
            try {
                String gen1 = "keys/shrink/" + inc0 + "/1/";
                byte[] oldVote = store.get(gen1 + "vote/1", T);
                assertTrue(new String(oldVote, StandardCharsets.UTF_8).startsWith("jcomm-shrink gen=1 "));
                // rank 1's generation-1 record, replayed where its generation-2 record belongs
                String gen2 = gen1 + "shrink/" + engine(n0).generation + "/2/";
                store.set(gen2 + "vote/1", oldVote);
                long s = System.nanoTime();
                ProtocolException e = assertThrows(ProtocolException.class, () -> n0.shrink(List.of(), Duration.ofSeconds(10)));
                assertTrue(System.nanoTime() - s < TimeUnit.SECONDS.toNanos(5), "not refused at once");
                assertTrue(e.getMessage().contains("another generation") && e.getMessage().contains("rank 1"), e.getMessage());
                assertEquals("shrink", e.operation());
            } finally {
                n0.close();
                n1.close();
            }
        }
    }
}
