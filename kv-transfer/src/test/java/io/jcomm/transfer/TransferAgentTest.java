package io.jcomm.transfer;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.store.InMemoryStore;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Two agents in one JVM over an in-memory store and real loopback sockets; shm through real /dev/shm files. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TransferAgentTest {

    private static final Set<Permission> RW = EnumSet.of(Permission.READ, Permission.WRITE);
    private final InMemoryStore store = new InMemoryStore(Duration.ofSeconds(10));
    private final List<TransferAgent> agents = new ArrayList<>();

    private TransferAgent agent(String name, TransferOptions.Builder b) {
        TransferAgent a = TransferAgent.open(store, b.build());
        agents.add(a);
        return a;
    }

    private TransferAgent agent(String name) {
        return agent(name, TransferOptions.builder(name).timeout(Duration.ofSeconds(10)));
    }

    @AfterEach
    void close() {
        for (TransferAgent a : agents) {
            a.close();
        }
        store.close();
    }

    static void fill(ByteBuffer b, int seed) {
        for (int i = 0; i < b.capacity(); i++) {
            b.put(i, (byte) (i * 31 + seed));
        }
    }

    static void assertFilled(ByteBuffer b, int from, int length, int seed, int shift) {
        for (int i = 0; i < length; i++) {
            if (b.get(from + i) != (byte) ((i + shift) * 31 + seed)) {
                throw new AssertionError("byte " + (from + i) + " is " + b.get(from + i) + ", expected " + (byte) ((i + shift) * 31 + seed));
            }
        }
    }

    static void assertAll(ByteBuffer b, byte v) {
        for (int i = 0; i < b.capacity(); i++) {
            if (b.get(i) != v) {
                throw new AssertionError("byte " + i + " is " + b.get(i) + ", expected untouched " + v);
            }
        }
    }

    private void writesReadsAndNotifies(boolean shared) {
        TransferAgent owner = agent("owner");
        TransferAgent init = agent("init");
        assertEquals(List.of("shm", "tcp"), owner.transports());
        int size = 9 << 20; // more than one tcp chunk, split over streams
        MemoryRegion target = shared ? owner.allocateShared(size, RW) : owner.register(ByteBuffer.allocate(size), RW);
        MemoryRegion src = init.register(ByteBuffer.allocateDirect(size), Set.of());
        fill(src.buffer(), 3);
        RemoteDescriptor d = RemoteDescriptor.decode(target.descriptor().encode());
        // 64 blocks of 4 KiB scattered, then the rest as one large range, with a notification
        List<LocalDescriptor> ls = new ArrayList<>();
        List<RemoteDescriptor> rs = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            ls.add(src.slice(i * 4096L, 4096));
            rs.add(d.slice((63 - i) * 4096L, 4096));
        }
        init.write(ls, rs, null, Duration.ofSeconds(10)).await();
        init.write(src.slice(1 << 20, size - (1 << 20)), d.slice(1 << 20, size - (1 << 20)), "req-1".getBytes(UTF_8)).await();
        Notification n = owner.pollNotification(Duration.ofSeconds(10)).orElseThrow();
        assertEquals("init", n.from());
        assertArrayEquals("req-1".getBytes(UTF_8), n.payload());
        ByteBuffer t = target.buffer();
        for (int i = 0; i < 64; i++) {
            assertFilled(t, (63 - i) * 4096, 4096, 3, i * 4096);
        }
        assertFilled(t, 1 << 20, size - (1 << 20), 3, 1 << 20);
        // read back into a heap region
        MemoryRegion back = init.register(ByteBuffer.allocate(size), Set.of());
        init.read(back.all(), d).await();
        ByteBuffer bb = back.buffer();
        for (int i = 0; i < size; i++) {
            assertEquals(t.get(i), bb.get(i), "byte " + i);
        }
        // a notification alone
        init.notify("owner", new byte[] {1, 2, 3}, Duration.ofSeconds(5)).await();
        assertArrayEquals(new byte[] {1, 2, 3}, owner.pollNotification(Duration.ofSeconds(5)).orElseThrow().payload());
        assertFalse(owner.pollNotification().isPresent());
    }

    @Test
    void tcpWritesReadsAndNotifiesEveryByte() {
        writesReadsAndNotifies(false);
    }

    @Test
    void shmWritesReadsAndNotifiesEveryByte() {
        writesReadsAndNotifies(true);
    }

    private void refusals(boolean shared) {
        TransferAgent owner = agent("owner");
        TransferAgent init = agent("init");
        MemoryRegion guard = shared ? owner.allocateShared(64 << 10, RW) : owner.register(ByteBuffer.allocate(64 << 10), RW);
        MemoryRegion readOnly = shared ? owner.allocateShared(4096, Set.of(Permission.READ))
                : owner.register(ByteBuffer.allocateDirect(4096), Set.of(Permission.READ));
        guard.buffer().put(0, (byte) 0); // zero-filled either way
        MemoryRegion src = init.register(ByteBuffer.allocate(128 << 10), Set.of());
        fill(src.buffer(), 9);

        // out of range: a descriptor forged past the region's end
        RemoteDescriptor g = guard.descriptor();
        RemoteDescriptor forged = new RemoteDescriptor(g.agent(), g.regionId(), g.generation(), g.kind(), 32 << 10, 64 << 10,
                g.permissions());
        TransferRefusedException e = refused(init.write(src.slice(0, 64 << 10), forged, "x".getBytes(UTF_8)));
        assertEquals(TransferRefusedException.Reason.OUT_OF_RANGE, e.reason());
        // permission: a write into a read-only region, a read of a write-only one
        e = refused(init.write(src.slice(0, 4096), readOnly.descriptor(), null));
        assertEquals(TransferRefusedException.Reason.PERMISSION, e.reason());
        MemoryRegion writeOnly = owner.register(ByteBuffer.allocate(4096), Set.of(Permission.WRITE));
        e = refused(init.read(src.slice(0, 4096), writeOnly.descriptor()));
        assertEquals(TransferRefusedException.Reason.PERMISSION, e.reason());
        // stale: deregistered, and its slot reused by a new region
        RemoteDescriptor old = guard.descriptor();
        owner.deregister(guard);
        MemoryRegion reused = shared ? owner.allocateShared(64 << 10, RW) : owner.register(ByteBuffer.allocate(64 << 10), RW);
        assertEquals(old.regionId(), reused.id());
        e = refused(init.write(src.slice(0, 4096), old.slice(0, 4096), null));
        assertEquals(TransferRefusedException.Reason.STALE, e.reason());
        assertAll(reused.buffer(), (byte) 0);
        assertAll(readOnly.buffer(), (byte) 0);
        assertAll(guard.buffer(), (byte) 0);
        assertFalse(owner.pollNotification().isPresent(), "a refused write delivers no notification");
        // and the connection still works after refusals
        init.write(src.slice(0, 4096), reused.descriptor(0, 4096), null).await();
        assertFilled(reused.buffer(), 0, 4096, 9, 0);
    }

    private static TransferRefusedException refused(TransferHandle h) {
        CommException e = assertThrows(CommException.class, h::await);
        return assertInstanceOf(TransferRefusedException.class, e);
    }

    @Test
    void tcpOwnerRefusesOutOfRangeForbiddenAndStaleWritingNothing() {
        refusals(false);
    }

    @Test
    void shmHeaderRefusesOutOfRangeForbiddenAndStaleWritingNothing() {
        refusals(true);
    }

    @Test
    void agentsAuthenticateWithTheJobToken() {
        byte[] token = "0123456789abcdef-job-token".getBytes(UTF_8);
        TransferAgent owner = agent("owner", TransferOptions.builder("owner").token(token));
        TransferAgent good = agent("good", TransferOptions.builder("good").token(token));
        TransferAgent wrong = agent("wrong", TransferOptions.builder("wrong").token("another-token-of-16-bytes".getBytes(UTF_8)));
        TransferAgent none = agent("none");
        MemoryRegion r = owner.register(ByteBuffer.allocate(4096), RW);
        MemoryRegion src = good.register(ByteBuffer.allocate(4096), Set.of());
        fill(src.buffer(), 1);
        good.write(src.all(), r.descriptor(), null).await();
        assertFilled(r.buffer(), 0, 4096, 1, 0);
        MemoryRegion s2 = wrong.register(ByteBuffer.allocate(4096), Set.of());
        assertInstanceOf(ProtocolException.class, assertThrows(CommException.class,
                () -> wrong.write(s2.all(), r.descriptor(), null).await()));
        MemoryRegion s3 = none.register(ByteBuffer.allocate(4096), Set.of());
        assertInstanceOf(ProtocolException.class, assertThrows(CommException.class,
                () -> none.write(s3.all(), r.descriptor(), null).await()));
        assertFilled(r.buffer(), 0, 4096, 1, 0);
    }

    @Test
    void aClosedPeerFailsPendingTransfersTypedAndDeregisterWaitsNeverHangs() throws Exception {
        TransferAgent owner = agent("owner", TransferOptions.builder("owner").transports(Set.of("tcp")));
        TransferAgent init = agent("init", TransferOptions.builder("init").transports(Set.of("tcp")));
        int size = 32 << 20;
        MemoryRegion target = owner.register(ByteBuffer.allocateDirect(size), RW);
        MemoryRegion src = init.register(ByteBuffer.allocateDirect(size), Set.of());
        List<TransferHandle> hs = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            hs.add(init.write(src.all(), target.descriptor(), null, Duration.ofSeconds(20)));
        }
        // deregistering the target while writes stream into it: returns once they stopped, the rest are refused
        owner.deregister(target, Duration.ofSeconds(5));
        int ok = 0;
        int stale = 0;
        for (TransferHandle h : hs) {
            try {
                h.await();
                ok++;
            } catch (TransferRefusedException e) {
                assertEquals(TransferRefusedException.Reason.STALE, e.reason());
                stale++;
            }
        }
        assertEquals(8, ok + stale);
        assertTrue(stale > 0, "writes after the deregistration are refused");
        // a peer that goes away mid-transfer
        MemoryRegion t2 = owner.register(ByteBuffer.allocateDirect(size), RW);
        hs.clear();
        for (int i = 0; i < 8; i++) {
            hs.add(init.write(src.all(), t2.descriptor(), null, Duration.ofSeconds(20)));
        }
        long t0 = System.nanoTime();
        owner.close();
        for (TransferHandle h : hs) {
            try {
                h.await();
            } catch (PeerFailureException | TransferRefusedException expected) {
                // typed: the peer's connection broke, or its region was revoked as it closed
            }
        }
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(2), "pending transfers ended quickly");
        // the survivor's own memory is still registered and usable
        assertTrue(src.isLive());
        init.deregister(src, Duration.ofSeconds(2));
    }

    @Test
    void aTransferToAnUnknownAgentTimesOutTyped() {
        TransferAgent init = agent("init");
        MemoryRegion src = init.register(ByteBuffer.allocate(16), Set.of());
        RemoteDescriptor nowhere = new RemoteDescriptor("nobody", 0, 1, MemoryKind.HEAP, 0, 16, Set.of(Permission.WRITE));
        long t0 = System.nanoTime();
        assertThrows(CommTimeoutException.class, () -> init.write(List.of(src.all()), List.of(nowhere), null,
                Duration.ofMillis(300)).await());
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(3));
    }
}
