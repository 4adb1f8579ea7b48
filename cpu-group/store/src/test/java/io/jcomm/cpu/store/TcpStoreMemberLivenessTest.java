package io.jcomm.cpu.store;

import static io.jcomm.cpu.store.RawConn.f;
import static io.jcomm.cpu.store.RawConn.hex;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.PeerFailureException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Member liveness over real sockets: a declared rank whose connection ends without a goodbye fails
 * the waits of its job's other declared clients at once, naming it; a clean close, undeclared
 * clients, torch clients and other jobs are unaffected.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpStoreMemberLivenessTest {

    private static final String JOB = "job-a";
    private static final byte[] PROBE = f().u8(4).u64(1).str("\0jcomm-store/v1").bytes();
    /** Legacy connections are upgraded to 2.1 numbering by the probe: CHECK 4, WAIT 5, GET 2. */
    private static final byte[] GOODBYE = f().u8(4).u64(1).str("\0jcomm-goodbye/v1").bytes();

    private TcpStoreServer server;

    @BeforeEach
    void start() {
        server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("liveness").build());
    }

    @AfterEach
    void stop() {
        server.close();
    }

    private TcpStoreConfig.Builder cfg() {
        return TcpStoreConfig.builder().port(server.port()).timeout(Duration.ofSeconds(30));
    }

    private TcpStore member(String job, int rank) {
        TcpStore s = TcpStore.connect(cfg().member(job, rank).rank(rank).build());
        assertTrue(s.isDeclaredMember());
        return s;
    }

    private static byte[] declaration(String job, int rank) {
        return f().u8(4).u64(3).str("\0jcomm-member/v1").str(job).u64(4).u32(rank).bytes();
    }

    /** A raw connection declared rank {@code rank} of {@code job}, byte for byte. */
    private RawConn rawMember(String job, int rank) throws Exception {
        RawConn c = new RawConn(server.port());
        c.send(PROBE).expect(hex("00"));
        c.send(declaration(job, rank)).expect(hex("00"));
        return c;
    }

    private static <T> CompletableFuture<Throwable> failureOf(Supplier<T> call) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                call.get();
                return null;
            } catch (Throwable t) {
                return t;
            }
        });
    }

    private void awaitPendingWaits(long n) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (server.stats().pendingWaits() < n) {
            if (System.nanoTime() > end) {
                throw new AssertionError("waits not pending: " + server.stats());
            }
            Thread.sleep(5);
        }
    }

    private static PeerFailureException assertMemberFailure(Throwable t, int deadRank, String... mentions) {
        PeerFailureException e = assertInstanceOf(PeerFailureException.class, t, String.valueOf(t));
        assertEquals(deadRank, e.peerRank());
        assertTrue(e.getMessage().contains("rank " + deadRank + " of job " + JOB
                + " left the store without a goodbye (process died?)"), e.getMessage());
        for (String m : mentions) {
            assertTrue(e.getMessage().contains(m), e.getMessage());
        }
        return e;
    }

    @Test
    void anAbruptDisconnectFailsTheJobsWaitsWithinTwoSecondsNamingTheRank() throws Exception {
        for (boolean reset : new boolean[] {false, true}) {
            server.close();
            start();
            try (TcpStore a = member(JOB, 0); TcpStore undeclared = TcpStore.connect(cfg().build());
                 TcpStore otherJob = member("job-b", 2)) {
                RawConn b = rawMember(JOB, 2);
                CompletableFuture<Throwable> waitFailure = failureOf(() -> {
                    a.wait(List.of("missing", "also-missing"), Duration.ofSeconds(30));
                    return null;
                });
                CompletableFuture<Throwable> otherJobWait = failureOf(() -> otherJob.get("missing", Duration.ofSeconds(30)));
                awaitPendingWaits(2);
                long t0 = System.nanoTime();
                if (reset) {
                    b.reset(); // RST
                } else {
                    b.close(); // FIN, no goodbye
                }
                Throwable t = waitFailure.get(10, TimeUnit.SECONDS);
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                assertMemberFailure(t, 2, "[missing, also-missing]", "op=wait");
                assertTrue(ms < 2000, "noticed after " + ms + " ms");

                // later waits of the job whose keys are missing fail at once: wait, get, multiGet, a clone
                a.set("exists", "v".getBytes(StandardCharsets.US_ASCII));
                long t1 = System.nanoTime();
                assertMemberFailure(assertThrows(PeerFailureException.class, () -> a.get("late", Duration.ofSeconds(30))),
                        2, "[late]", "op=get");
                assertMemberFailure(assertThrows(PeerFailureException.class,
                        () -> a.multiGet(List.of("exists", "late"), Duration.ofSeconds(30))), 2, "op=multiGet");
                try (TcpStore clone = TcpStore.connect(a.config())) {
                    assertTrue(clone.isDeclaredMember());
                    assertMemberFailure(assertThrows(PeerFailureException.class,
                            () -> clone.wait(List.of("late"), Duration.ofSeconds(30))), 2);
                }
                assertTrue(System.nanoTime() - t1 < TimeUnit.SECONDS.toNanos(5));
                // keys that exist are still served (a finished rank's keys stay readable)
                assertArrayEquals("v".getBytes(StandardCharsets.US_ASCII), a.get("exists"));
                a.wait(List.of("exists"));
                assertEquals(List.of("v"), a.multiGet(List.of("exists")).stream()
                        .map(v -> new String(v, StandardCharsets.US_ASCII)).toList());
                assertEquals(1, a.add("counter", 1));

                // an undeclared client and another job keep today's behaviour
                assertInstanceOf(CommTimeoutException.class, assertThrows(RuntimeException.class,
                        () -> undeclared.wait(List.of("late"), Duration.ofMillis(300))));
                assertFalse(otherJobWait.isDone());
                a.set("missing", new byte[] {9});
                assertNull(otherJobWait.get(10, TimeUnit.SECONDS));
                TcpStoreServer.Stats st = server.stats();
                assertEquals(1, st.memberDeaths(), st.toString());
                assertTrue(st.memberFailuresSent() >= 4, st.toString());
            }
        }
    }

    @Test
    void aCleanCloseIsNoDeathEvenWithAWaitPendingOrAPipelinedGetDropped() throws Exception {
        try (TcpStore a = member(JOB, 0); TcpStore setter = TcpStore.connect(cfg().build())) {
            CompletableFuture<Throwable> aWaits = failureOf(() -> a.get("key", Duration.ofSeconds(30)));
            awaitPendingWaits(1);
            // an idle member closes: its goodbye is processed in order
            member(JOB, 1).close();
            // a member closed from another thread while its own wait is pending: the goodbye is held
            // behind that WAIT and found at the end of the input
            TcpStore b = member(JOB, 2);
            CompletableFuture<Throwable> bWaits = failureOf(() -> b.get("never", Duration.ofSeconds(30)));
            awaitPendingWaits(2);
            b.close();
            assertInstanceOf(CommClosedException.class, bWaits.get(10, TimeUnit.SECONDS));
            // a member whose pipelined get times out drops that connection (goodbye behind the held GET)
            try (TcpStore c = member(JOB, 3)) {
                assertThrows(CommTimeoutException.class, () -> c.get("never", Duration.ofMillis(200)));
                assertEquals(1, c.add("after-timeout", 1)); // reconnected and declared again
                assertTrue(c.isDeclaredMember());
            }
            // a raw member that sends the goodbye and closes
            try (RawConn d = rawMember(JOB, 4)) {
                d.send(GOODBYE);
            }
            Thread.sleep(300);
            assertFalse(aWaits.isDone(), () -> "the wait ended: " + aWaits.join());
            setter.set("key", new byte[] {1});
            assertNull(aWaits.get(10, TimeUnit.SECONDS));
            assertEquals(0, server.stats().memberDeaths(), server.stats().toString());
        }
    }

    @Test
    void aCloseFromAnotherThreadIsNoDeathWhereverItMeetsTheWaitingCall() throws Exception {
        // the close lands anywhere around the waiting call: before its WAIT is sent, while the caller is on
        // its way into the wait, or while it is blocked. Every one says goodbye first (an abort that let
        // the caller see it before the goodbye was out had the caller close the channel under it: a death)
        java.util.Random random = new java.util.Random(42);
        for (int round = 0; round < 150; round++) {
            TcpStore b = member(JOB, 1);
            CompletableFuture<Throwable> waits = failureOf(() -> b.get("never", Duration.ofSeconds(30)));
            long pendingBefore = server.stats().pendingWaits();
            long until = System.nanoTime() + random.nextInt(3_000_000);
            while (System.nanoTime() < until && server.stats().pendingWaits() == pendingBefore) {
                Thread.onSpinWait();
            }
            b.close();
            Throwable t = waits.get(10, TimeUnit.SECONDS);
            int r = round;
            assertTrue(t instanceof CommClosedException, () -> "round " + r + ": " + t);
        }
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (server.stats().pendingWaits() > 0 && System.nanoTime() < end) {
            Thread.sleep(5);
        }
        assertEquals(0, server.stats().memberDeaths(), server.stats().toString());
    }

    @Test
    void theWireExtensionByteForByteAndTorchClientsNeverSeeIt() throws Exception {
        try (RawConn a = rawMember(JOB, 0); RawConn torch = new RawConn(server.port());
             RawConn undeclared = new RawConn(server.port())) {
            undeclared.send(PROBE).expect(hex("00"));
            // a pending WAIT of a declared member, of a torch 1.13 client and of an undeclared jcomm client
            a.send(f().u8(5).u64(1).str("/k").u8(2).str("/k")).expectSilence(50);
            torch.send(f().u8(5).u64(1).str("/k")).expectSilence(50);
            undeclared.send(f().u8(5).u64(1).str("/k")).expectSilence(50);
            RawConn b = rawMember(JOB, 7);
            b.close();
            // the member gets FD and the dead rank (u32 LE), then the server closes the connection
            a.expect(hex("FD 07000000")).expectClosed();
            torch.expectSilence(200);
            undeclared.expectSilence(50);
            // a later WAIT of a declared member of the job, with a key missing: at once
            try (RawConn c = rawMember(JOB, 1)) {
                c.send(f().u8(5).u64(1).str("/other")).expect(hex("FD 07000000")).expectClosed();
            }
            // with every key present it is served as always
            try (RawConn setter = new RawConn(server.port())) {
                setter.send(f().u8(0).str("/k").str("v"));
            }
            torch.expect(hex("00"));
            undeclared.expect(hex("00"));
            try (RawConn c = rawMember(JOB, 1)) {
                c.send(f().u8(5).u64(1).str("/k").u8(2).str("/k")).expect(f().u8(0).str("v"));
            }
        }
    }

    @Test
    void badDeclarationsCloseOnlyThatConnectionAndUnprobedOnesAreOrdinaryChecks() throws Exception {
        try (RawConn good = rawMember(JOB, 0)) {
            byte[][] bad = {
                declaration("x".repeat(257), 1), // job id too long
                declaration("", 1), // empty job id
                declaration("a\nb", 1), // control character
                f().u8(4).u64(3).str("\0jcomm-member/v1").str(new byte[] {(byte) 0xFF}).u64(4).u32(1).bytes(), // not UTF-8
                f().u8(4).u64(3).str("\0jcomm-member/v1").str(JOB).u64(3).raw(new byte[3]).bytes(), // 3-byte rank
                declaration(JOB, -1), // rank 2^32-1: above Integer.MAX_VALUE
            };
            for (byte[] d : bad) {
                try (RawConn c = new RawConn(server.port())) {
                    c.send(PROBE).expect(hex("00")).send(d).expectClosed();
                }
            }
            try (RawConn twice = rawMember(JOB, 5)) {
                twice.send(declaration(JOB, 6)).expectClosed();
            }
            // without the probe, a declaration is just a CHECK of missing keys (what a torch server answers)
            try (RawConn unprobed = new RawConn(server.port())) {
                unprobed.send(declaration(JOB, 3)).expect(hex("01"));
                unprobed.send(GOODBYE).expect(hex("01"));
            }
            good.send(f().u8(6)).expect(f().u64(0));
            // none of these was a death: the bad ones were closed by the server, twice too
            assertEquals(0, server.stats().memberDeaths(), server.stats().toString());
        }
    }

    @Test
    void memberIdentitiesAreBoundedAndValidatedAndCarriedByCopies() {
        assertThrows(IllegalArgumentException.class, () -> new TcpStoreConfig.Member("", 0));
        assertThrows(IllegalArgumentException.class, () -> new TcpStoreConfig.Member(null, 0));
        assertThrows(IllegalArgumentException.class, () -> new TcpStoreConfig.Member("x".repeat(257), 0));
        assertThrows(IllegalArgumentException.class, () -> new TcpStoreConfig.Member("a\tb", 0));
        assertThrows(IllegalArgumentException.class, () -> new TcpStoreConfig.Member("job", -1));
        assertThrows(IllegalArgumentException.class,
                () -> TcpStoreConfig.builder().member("job", 0).probe(false).build());
        TcpStoreConfig.Member m = new TcpStoreConfig.Member("é".repeat(128), Integer.MAX_VALUE); // 256 bytes
        TcpStoreConfig c = TcpStoreConfig.builder().member(m).build();
        assertEquals(m, c.toBuilder().build().member().orElseThrow());
        assertTrue(c.toString().contains("member rank " + Integer.MAX_VALUE + " of job é"), c.toString());
        assertTrue(TcpStoreConfig.builder().build().member().isEmpty());
    }

    @Test
    void aMemberThatDiesWhileAnotherRankWaitsInATimedWaitGetsThePeerFailureNotATimeout() throws Exception {
        try (TcpStore a = member(JOB, 0)) {
            RawConn b = rawMember(JOB, 3);
            CompletableFuture<Throwable> w = failureOf(() -> {
                a.wait(List.of("x"), Duration.ofSeconds(30));
                return null;
            });
            awaitPendingWaits(1);
            b.reset();
            assertMemberFailure(w.get(10, TimeUnit.SECONDS), 3, "[x]");
            // the member connection was closed by the server after the reply; the store reconnects
            assertEquals(1, a.add("n", 1));
            assertTrue(a.isDeclaredMember());
        }
    }
    /**
     * Every dead rank of a job can be asked for (not only the first), by declared clients of that job;
     * a new generation of the job (another job id) starts without deaths and its waits work; the wire
     * form is a u32 count and the ranks.
     */
    @Test
    void everyDeadRankIsKnownAndANewGenerationWaitsAgain() throws Exception {
        try (TcpStore survivor = member(JOB, 0); TcpStore undeclared = TcpStore.connect(cfg().build())) {
            assertArrayEquals(new int[0], survivor.deadMembers());
            RawConn five = rawMember(JOB, 5);
            RawConn three = rawMember(JOB, 3);
            RawConn clean = rawMember(JOB, 7);
            five.close();
            three.reset();
            clean.send(f().u8(4).u64(1).str("\0jcomm-goodbye/v1").bytes());
            clean.close();
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (survivor.deadMembers().length < 2 && System.nanoTime() < end) {
                Thread.sleep(5);
            }
            assertArrayEquals(new int[] {3, 5}, survivor.deadMembers(), "rank 7 said goodbye");
            assertArrayEquals(new int[0], undeclared.deadMembers());
            // the old job's waits on missing keys fail at once; the next generation's wait normally
            assertMemberFailure(failureOf(() -> survivor.get("gen1", Duration.ofSeconds(5))).get(10, TimeUnit.SECONDS), 5);
            // the server closed that connection after the failure: the next call reconnects and asks again
            assertArrayEquals(new int[] {3, 5}, survivor.deadMembers());
            try (TcpStore gen1 = survivor.withMember(JOB + "/g1", 0); TcpStore peer = member(JOB + "/g1", 1)) {
                assertTrue(gen1.isDeclaredMember());
                CompletableFuture<Throwable> waiting = failureOf(() -> gen1.get("gen1", Duration.ofSeconds(10)));
                awaitPendingWaits(1);
                peer.set("gen1", new byte[] {1});
                assertEquals(null, waiting.get(10, TimeUnit.SECONDS));
                assertArrayEquals(new int[0], gen1.deadMembers());
            }
            // byte for byte: a CHECK of the dead key answers the count and the ranks
            try (RawConn raw = rawMember(JOB, 9)) {
                raw.send(f().u8(4).u64(1).str("\0jcomm-dead/v1").bytes()).expect(f().u32(2).u32(3).u32(5).bytes());
            }
        }
    }
}
