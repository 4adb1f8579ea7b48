package io.jcomm.cpu.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.ByteBufAllocatorMetricProvider;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Hostile input: 10,000 random, corrupted and truncated frames over many connections, a slow
 * sender holding partial frames open, and a client that pipelines requests without reading
 * replies. Afterwards the server still answers correctly, its heap is bounded, and no connection
 * ever buffered more than the configured request limit.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TcpStoreFuzzTest {

    private static final int FRAMES = 10_000;
    private static final int THREADS = 8;
    private static final int MAX_KEY = 1024;
    private static final int MAX_VALUE = 64 * 1024;
    private static final long MAX_REQUEST = 256 * 1024;

    private static long usedHeapAfterGc() {
        MemoryMXBean m = ManagementFactory.getMemoryMXBean();
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return m.getHeapMemoryUsage().getUsed();
    }

    /** Direct memory held by Netty's default allocator (the one the server's channels use). */
    private static long directMemoryOfTheDefaultAllocator() {
        return ((ByteBufAllocatorMetricProvider) ByteBufAllocator.DEFAULT).metric().usedDirectMemory();
    }

    @Test
    void tenThousandHostileFramesLeaveTheServerHealthyAndBounded() throws Exception {
        // a listen backlog of 1,024 (not somaxconn): with a deeper accept queue most storm connections are
        // reset by their client before the server accepts them, and their frames are never read at all
        TcpStoreServerConfig cfg = TcpStoreServerConfig.builder().name("fuzz").maxKeyBytes(MAX_KEY)
                .maxValueBytes(MAX_VALUE).maxRequestBytes(MAX_REQUEST).maxStoreBytes(8 * 1024 * 1024).backlog(1024).build();
        try (TcpStoreServer server = TcpStoreServer.start(cfg);
             TcpStore good = TcpStore.connect(TcpStoreConfig.builder().port(server.port())
                     .timeout(Duration.ofSeconds(30)).build())) {
            good.set("canary", "alive".getBytes(StandardCharsets.UTF_8));
            long heapBefore = usedHeapAfterGc();

            // slow senders: partial frames of declared (allowed) large size, held open during the storm
            List<Socket> slow = new ArrayList<>();
            for (int i = 0; i < 20; i++) {
                Socket s = new Socket(InetAddress.getLoopbackAddress(), server.port());
                RawConn.F f = RawConn.f().u8(0).str("/slow" + i).u64(MAX_VALUE).raw(new byte[MAX_VALUE / 2]);
                s.getOutputStream().write(f.bytes());
                slow.add(s);
            }

            AtomicLong sent = new AtomicLong();
            AtomicLong connections = new AtomicLong();
            ExecutorService pool = Executors.newFixedThreadPool(THREADS);
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                long seed = 1000 + t;
                fs.add(pool.submit(() -> {
                    Random r = new Random(seed);
                    while (sent.get() < FRAMES) {
                        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), server.port())) {
                            connections.incrementAndGet();
                            s.setSoLinger(true, 0);
                            OutputStream o = s.getOutputStream();
                            int n = 1 + r.nextInt(4);
                            for (int i = 0; i < n && sent.get() < FRAMES; i++) {
                                o.write(StoreFuzz.hostileFrame(r, MAX_KEY));
                                sent.incrementAndGet();
                            }
                        } catch (IOException closedByServer) {
                            // expected: the server closes connections with bad input
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get(90, TimeUnit.SECONDS);
            }
            pool.shutdown();

            // the good client was never disturbed, during or after the storm
            assertArrayEquals("alive".getBytes(StandardCharsets.UTF_8), good.get("canary"));
            assertEquals(1, good.add("after-fuzz", 1));

            TcpStoreServer.Stats st = server.stats();
            // (not every client connection is seen: one reset while still in the accept queue may never be)
            assertTrue(st.connectionsFaulted() > FRAMES / 10, "few connections rejected? " + st);
            // nothing beyond the limits was ever buffered or executed
            assertTrue(st.largestRequestBytes() <= MAX_REQUEST, st.toString());
            assertTrue(st.peakBufferedBytes() <= MAX_REQUEST + 64 * 1024, st.toString());
            assertTrue(st.peakBufferCapacity() <= 2 * (MAX_REQUEST + 64 * 1024), st.toString());
            long heapDuring = usedHeapAfterGc();
            assertTrue(heapDuring - heapBefore < 32L * 1024 * 1024,
                    "heap grew by " + (heapDuring - heapBefore) / 1024 + " KiB with the slow senders open");

            for (Socket s : slow) {
                s.close();
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (server.stats().connectionsOpen() > 1 && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            st = server.stats();
            assertEquals(1, st.connectionsOpen(), "connections not cleaned up: " + st);
            assertEquals(0, st.pendingWaits(), st.toString());
            assertTrue(st.storedBytes() <= cfg.maxStoreBytes(), st.toString());
            assertEquals(2, good.add("after-fuzz", 1));
            System.out.println("fuzz: " + sent.get() + " frames over " + connections.get() + " connections; " + st);
        }
    }

    @Test
    void aClientThatNeverReadsRepliesCannotMakeTheServerBufferWithoutBound() throws Exception {
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("flood").build());
             TcpStore good = TcpStore.connect(TcpStoreConfig.builder().port(server.port())
                     .timeout(Duration.ofSeconds(30)).build())) {
            byte[] big = new byte[512 * 1024];
            good.set("big", big);
            // SET has no reply: a round trip on the same connection makes sure the server stored it
            // before another connection asks (under load the flooder's GET could overtake it)
            assertArrayEquals(big, good.get("big"));
            long directBefore = directMemoryOfTheDefaultAllocator();
            // 4,000 GETs of 512 KiB = 2 GiB of replies requested; the flooder never reads
            ByteArrayOutputStream req = new ByteArrayOutputStream();
            byte[] get = RawConn.f().u8(2).str("/big").bytes();
            for (int i = 0; i < 4000; i++) {
                req.write(get);
            }
            try (Socket flood = new Socket(InetAddress.getLoopbackAddress(), server.port())) {
                flood.getOutputStream().write(req.toByteArray());
                Thread.sleep(300);
                // the server keeps serving others
                assertArrayEquals(big, good.get("big"));
                assertEquals(1, good.add("n", 1));
                long direct = directMemoryOfTheDefaultAllocator() - directBefore;
                assertTrue(direct < 64L * 1024 * 1024, "outbound buffering grew to " + direct / 1024 + " KiB");
                // and the flooder does get correct replies when it reads
                InputStream in = flood.getInputStream();
                flood.setSoTimeout(10_000);
                for (int i = 0; i < 3; i++) {
                    byte[] len = in.readNBytes(8);
                    assertArrayEquals(RawConn.f().u64(big.length).bytes(), len);
                    assertEquals(big.length, in.readNBytes(big.length).length);
                }
            }
        }
    }
}
