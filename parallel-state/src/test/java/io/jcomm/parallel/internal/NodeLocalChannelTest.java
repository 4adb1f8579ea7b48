package io.jcomm.parallel.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.PeerFailureException;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The node-local channel with ranks as threads over one mapped file. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NodeLocalChannelTest {

    private static final Duration T = Duration.ofSeconds(20);

    @TempDir
    Path dir;

    private final ExecutorService pool = Executors.newCachedThreadPool();
    private final List<NodeLocalChannel> opened = new ArrayList<>();

    @AfterEach
    void tearDown() {
        opened.forEach(NodeLocalChannel::close);
        pool.shutdownNow();
    }

    private NodeLocalChannel[] open(int n, int capacity, String name) {
        NodeLocalChannel[] cs = new NodeLocalChannel[n];
        for (int r = 0; r < n; r++) {
            cs[r] = NodeLocalChannel.open(dir, name, "g", r, n, capacity, 0x5EEDL);
            opened.add(cs[r]);
        }
        return cs;
    }

    @Test
    void barrierAndBroadcastInOrderWithBigPayloadsFallingBack() throws Exception {
        int n = 3;
        NodeLocalChannel[] cs = open(n, 1024, "bb");
        for (NodeLocalChannel c : cs) {
            assertTrue(c.attachedByAll());
        }
        assertEquals(0600, posixMode(cs[0].path()));
        List<Future<List<String>>> fs = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            int rr = r;
            fs.add(pool.submit(() -> {
                List<String> seen = new ArrayList<>();
                for (int i = 0; i < 300; i++) {
                    cs[rr].barrier(Deadline.after(T));
                    int src = i % n;
                    byte[] mine = rr == src ? ("m" + i + "-from-" + src).getBytes(StandardCharsets.UTF_8) : null;
                    byte[] got = cs[rr].broadcast(mine, src, Deadline.after(T));
                    seen.add(new String(got, StandardCharsets.UTF_8));
                }
                byte[] big = rr == 1 ? new byte[1025] : null;
                assertNull(cs[rr].broadcast(big, 1, Deadline.after(T))); // too big: every rank is told
                return seen;
            }));
        }
        for (Future<List<String>> f : fs) {
            List<String> seen = f.get(30, TimeUnit.SECONDS);
            for (int i = 0; i < 300; i++) {
                assertEquals("m" + i + "-from-" + (i % n), seen.get(i));
            }
        }
        cs[0].unlink();
        assertFalse(Files.exists(cs[0].path()));
        // the mapping outlives the name
        Future<?> a = pool.submit(() -> cs[1].barrier(Deadline.after(T)));
        Future<?> b = pool.submit(() -> cs[2].barrier(Deadline.after(T)));
        cs[0].barrier(Deadline.after(T));
        a.get(10, TimeUnit.SECONDS);
        b.get(10, TimeUnit.SECONDS);
    }

    private static int posixMode(Path p) throws Exception {
        int mode = 0;
        for (PosixFilePermission perm : Files.getPosixFilePermissions(p)) {
            mode |= 1 << (8 - perm.ordinal());
        }
        return mode;
    }

    @Test
    void differentCollectivesAtOneStepAreAMismatchAndPoison() throws Exception {
        NodeLocalChannel[] cs = open(2, 256, "mm");
        assertTrue(cs[0].attachedByAll() && cs[1].attachedByAll());
        Future<byte[]> other = pool.submit(() -> cs[1].broadcast(new byte[] {1}, 1, Deadline.after(T)));
        CollectiveMismatchException e = assertThrows(CollectiveMismatchException.class,
                () -> cs[0].barrier(Deadline.after(T)));
        assertTrue(e.getMessage().contains("broadcast(src=1)"), e.getMessage());
        assertArrayEquals(new byte[] {1}, other.get(10, TimeUnit.SECONDS));
        // poisoned: the next call fails at once with the same cause
        assertThrows(CollectiveMismatchException.class, () -> cs[0].barrier(Deadline.after(T)));
    }

    @Test
    void timeoutNamesTheMissingRanks() {
        NodeLocalChannel[] cs = open(3, 256, "to");
        assertTrue(cs[0].attachedByAll());
        long t0 = System.nanoTime();
        CommTimeoutException e = assertThrows(CommTimeoutException.class,
                () -> cs[0].barrier(Deadline.after(Duration.ofMillis(200))));
        assertTrue(e.getMessage().contains("[1, 2]"), e.getMessage());
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(5));
    }

    @Test
    void aPeerThatClosedFailsTheWaiterWithClosed() {
        NodeLocalChannel[] cs = open(2, 256, "cl");
        assertTrue(cs[0].attachedByAll());
        cs[1].close();
        CommClosedException e = assertThrows(CommClosedException.class, () -> cs[0].barrier(Deadline.after(T)));
        assertTrue(e.getMessage().contains("rank 1 closed"), e.getMessage());
        assertThrows(CommClosedException.class, () -> cs[1].barrier(Deadline.after(T)));
    }

    @Test
    void aDeadPeerProcessIsAPeerFailureWithinMilliseconds() throws Exception {
        NodeLocalChannel c0 = NodeLocalChannel.open(dir, "dead", "g", 0, 2, 256, 7L);
        opened.add(c0);
        Process peer = new ProcessBuilder("sleep", "30").start();
        try {
            // play rank 1 from another process: its slot carries that process's identity and the mark
            try (FileChannel fc = FileChannel.open(dir.resolve("dead"), StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                MappedByteBuffer m = fc.map(FileChannel.MapMode.READ_WRITE, 0, NodeLocalChannel.fileBytes(2, 256));
                m.order(ByteOrder.nativeOrder());
                int slot = NodeLocalChannel.LINE * 2;
                m.putLong(slot + NodeLocalChannel.PID, peer.pid());
                m.putLong(slot + NodeLocalChannel.START, io.jcomm.api.internal.shm.ProcessIdentity.startTicksOf(peer.pid()));
                m.putLong(slot + NodeLocalChannel.MARK, 7L);
            }
            assertTrue(c0.attachedByAll());
        } finally {
            peer.destroyForcibly();
            peer.waitFor(10, TimeUnit.SECONDS);
        }
        long t0 = System.nanoTime();
        PeerFailureException e = assertThrows(PeerFailureException.class, () -> c0.barrier(Deadline.after(T)));
        assertEquals(1, e.peerRank());
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(2), "took " + (System.nanoTime() - t0) / 1e6 + " ms");
    }

    @Test
    void notEveryoneAttachedOrAnotherDirectoryMeansNoChannel(@TempDir Path other) {
        NodeLocalChannel c0 = NodeLocalChannel.open(dir, "half", "g", 0, 2, 256, 9L);
        opened.add(c0);
        assertFalse(c0.attachedByAll()); // rank 1 never came
        NodeLocalChannel a = NodeLocalChannel.open(dir, "split", "g", 0, 2, 256, 9L);
        NodeLocalChannel b = NodeLocalChannel.open(other, "split", "g", 1, 2, 256, 9L);
        opened.add(a);
        opened.add(b);
        assertFalse(a.attachedByAll()); // each sees only itself: the same verdict on both
        assertFalse(b.attachedByAll());
        assertNull(NodeLocalChannel.open(dir.resolve("missing-dir"), "x", "g", 0, 2, 256, 9L));
    }

    @Test
    void fileNamesCarryTheJobTheGenerationAndTheLayout() {
        String name = NodeLocalChannel.fileName(0xABCL, "mp2", "tp:1", 4, 65536);
        assertEquals("jcomm-ps-abc-mp2-tp_1-n4-c65536", name);
        assertInstanceOf(String.class, name);
    }
}
