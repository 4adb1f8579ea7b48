package io.jcomm.cpu.store;

import static io.jcomm.cpu.store.RawConn.f;
import static io.jcomm.cpu.store.RawConn.hex;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommTimeoutException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What our client puts on the wire, byte for byte, against a scripted fake server that answers like
 * a torch server would: keys as "/" + key, the dialect preambles, the capability probe, torch's two
 * round trips for get against a non-jcomm server, and the timeout handling of each dialect.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class TcpStoreClientWireTest {

    private static final byte[] PROBE = f().u8(4).u64(1).str("\0jcomm-store/v1").bytes();
    /** After a READY probe: does the server keep its keys (and track request ids)? */
    private static final byte[] DURABLE = f().u8(4).u64(1).str("\0jcomm-dur/v1").bytes();

    /** A one-connection-at-a-time scripted server. */
    private static final class FakeServer implements AutoCloseable {
        final ServerSocket ss;
        Socket s;
        InputStream in;
        OutputStream out;

        FakeServer() throws IOException {
            ss = new ServerSocket(0, 4, InetAddress.getLoopbackAddress());
            ss.setSoTimeout(10_000);
        }

        int port() {
            return ss.getLocalPort();
        }

        FakeServer accept() throws IOException {
            s = ss.accept();
            s.setSoTimeout(10_000);
            s.setTcpNoDelay(true);
            in = s.getInputStream();
            out = s.getOutputStream();
            return this;
        }

        /** Reads exactly the expected request bytes. */
        FakeServer expect(byte[] want) throws IOException {
            byte[] got = in.readNBytes(want.length);
            assertArrayEquals(want, got, () -> "client sent " + HexFormat.of().formatHex(got) + ", expected "
                    + HexFormat.of().formatHex(want));
            return this;
        }

        FakeServer expect(RawConn.F f) throws IOException {
            return expect(f.bytes());
        }

        FakeServer reply(byte[] b) throws IOException {
            out.write(b);
            out.flush();
            return this;
        }

        FakeServer reply(RawConn.F f) throws IOException {
            return reply(f.bytes());
        }

        /** Asserts the client closed this connection. */
        void expectClientClosed() throws IOException {
            assertEquals(-1, in.read(), "expected the client to drop the connection");
        }

        @Override
        public void close() throws IOException {
            if (s != null) {
                s.close();
            }
            ss.close();
        }
    }

    private static TcpStoreConfig.Builder cfg(FakeServer fs, TcpStoreDialect d) {
        return TcpStoreConfig.builder().port(fs.port()).dialect(d).timeout(Duration.ofSeconds(10));
    }

    @Test
    void legacyClientAgainstATorchServerUsesTorchsFramesAndTwoRoundTripGet() throws Exception {
        try (FakeServer fs = new FakeServer()) {
            CompletableFuture<TcpStore> cf = CompletableFuture.supplyAsync(() -> TcpStore.connect(cfg(fs,
                    TcpStoreDialect.TORCH_1_13).build()));
            fs.accept().expect(PROBE).reply(hex("01")); // a torch server: NOT_READY
            try (TcpStore s = cf.get(10, TimeUnit.SECONDS)) {
                assertFalse(s.isJcommServer());
                CompletableFuture<byte[]> get = CompletableFuture.supplyAsync(() -> s.get("k"));
                // WAIT first, alone (a torch server would drop a GET of a missing key)
                fs.expect(hex("05 0100000000000000 0200000000000000 2F6B"));
                Thread.sleep(50);
                assertFalse(get.isDone());
                fs.reply(hex("00")).expect(hex("02 0200000000000000 2F6B")).reply(f().str("val"));
                assertArrayEquals("val".getBytes(StandardCharsets.UTF_8), get.get(10, TimeUnit.SECONDS));
                CompletableFuture<Long> add = CompletableFuture.supplyAsync(() -> s.add("n", -3));
                fs.expect(hex("03 0200000000000000 2F6E FDFFFFFFFFFFFFFF")).reply(f().u64(-3));
                assertEquals(-3L, add.get(10, TimeUnit.SECONDS));
                CompletableFuture<Void> set = CompletableFuture.runAsync(() -> s.set("ü", new byte[] {1, 2}));
                fs.expect(f().u8(0).str("/ü").str(new byte[] {1, 2}));
                set.get(10, TimeUnit.SECONDS);
                // multiSet without MULTI_SET: pipelined SETs; multiGet: WAIT, then pipelined GETs
                CompletableFuture.runAsync(() -> s.multiSet(List.of("a", "b"), List.of(new byte[] {1}, new byte[] {2})))
                        .get(10, TimeUnit.SECONDS);
                fs.expect(f().u8(0).str("/a").str(new byte[] {1}).u8(0).str("/b").str(new byte[] {2}));
                CompletableFuture<List<byte[]>> mg = CompletableFuture.supplyAsync(() -> s.multiGet(List.of("a", "b")));
                fs.expect(f().u8(5).u64(2).str("/a").str("/b")).reply(hex("00"));
                fs.expect(f().u8(2).str("/a").u8(2).str("/b")).reply(f().str(new byte[] {1}).str(new byte[] {2}));
                assertArrayEquals(new byte[] {2}, mg.get(10, TimeUnit.SECONDS).get(1));
                // a timed-out wait: no cancel exists in 1.13, so the client drops the connection
                CompletableFuture<Throwable> w = CompletableFuture.supplyAsync(() -> {
                    try {
                        s.wait(List.of("x"), Duration.ofMillis(200));
                        return null;
                    } catch (RuntimeException e) {
                        return e;
                    }
                });
                fs.expect(f().u8(5).u64(1).str("/x"));
                assertTrue(w.get(10, TimeUnit.SECONDS) instanceof CommTimeoutException);
                fs.expectClientClosed();
            }
        }
    }

    @Test
    void torch25PreambleIsValidateThenPingThenProbe() throws Exception {
        try (FakeServer fs = new FakeServer()) {
            CompletableFuture<TcpStore> cf = CompletableFuture.supplyAsync(() -> TcpStore.connect(cfg(fs,
                    TcpStoreDialect.TORCH_2_5).build()));
            fs.accept().expect(hex("00 CE F7 85 3C")).expect(hex("0D"));
            byte[] nonce = fs.in.readNBytes(4);
            fs.expect(f().u8(5).u64(1).str("\0jcomm-store/v1")); // CHECK is 5 in 2.2+ numbering
            fs.reply(nonce).reply(hex("01"));
            try (TcpStore s = cf.get(10, TimeUnit.SECONDS)) {
                assertFalse(s.isJcommServer());
                CompletableFuture<Long> n = CompletableFuture.supplyAsync(s::numKeys);
                fs.expect(hex("07")).reply(f().u64(12));
                assertEquals(12L, n.get(10, TimeUnit.SECONDS));
                CompletableFuture<Boolean> del = CompletableFuture.supplyAsync(() -> s.deleteKey("k"));
                fs.expect(f().u8(8).str("/k")).reply(f().u64(1));
                assertTrue(del.get(10, TimeUnit.SECONDS));
                CompletableFuture<Void> app = CompletableFuture.runAsync(() -> s.append("k", new byte[] {9}));
                fs.expect(f().u8(9).str("/k").str(new byte[] {9}));
                app.get(10, TimeUnit.SECONDS);
                // a timed-out wait on 2.2+: CANCEL_WAIT (12), WAIT_CANCELED, connection kept
                CompletableFuture<Throwable> w = CompletableFuture.supplyAsync(() -> {
                    try {
                        s.wait(List.of("x"), Duration.ofMillis(200));
                        return null;
                    } catch (RuntimeException e) {
                        return e;
                    }
                });
                fs.expect(f().u8(6).u64(1).str("/x")).expect(hex("0C")).reply(hex("01"));
                assertTrue(w.get(10, TimeUnit.SECONDS) instanceof CommTimeoutException);
                CompletableFuture<Boolean> chk = CompletableFuture.supplyAsync(() -> s.check(List.of("x")));
                fs.expect(f().u8(5).u64(1).str("/x")).reply(hex("01"));
                assertFalse(chk.get(10, TimeUnit.SECONDS));
                // the race: the wait completes while cancelling -> STOP_WAITING, WAIT_CANCELED; success
                CompletableFuture<Throwable> w2 = CompletableFuture.supplyAsync(() -> {
                    try {
                        s.wait(List.of("y"), Duration.ofMillis(200));
                        return null;
                    } catch (RuntimeException e) {
                        return e;
                    }
                });
                fs.expect(f().u8(6).u64(1).str("/y")).expect(hex("0C")).reply(hex("00 01"));
                assertEquals(null, w2.get(10, TimeUnit.SECONDS));
            }
        }
    }

    @Test
    void aJcommServerGetsPipelinedWaitAndGetOnTheUpgradedNumbering() throws Exception {
        try (FakeServer fs = new FakeServer()) {
            CompletableFuture<TcpStore> cf = CompletableFuture.supplyAsync(() -> TcpStore.connect(cfg(fs,
                    TcpStoreDialect.TORCH_1_13).build()));
            fs.accept().expect(PROBE).reply(hex("00")); // READY: a jcomm server
            fs.expect(DURABLE).reply(hex("01")); // an older jcomm server: no request ids
            try (TcpStore s = cf.get(10, TimeUnit.SECONDS)) {
                assertTrue(s.isJcommServer());
                CompletableFuture<byte[]> get = CompletableFuture.supplyAsync(() -> s.get("k"));
                // one write: WAIT + GET
                fs.expect(f().u8(5).u64(1).str("/k").u8(2).str("/k")).reply(f().u8(0).str("v"));
                assertArrayEquals(new byte[] {'v'}, get.get(10, TimeUnit.SECONDS));
                // 2.1 numbering after the upgrade: DELETE_KEY is 7, MULTI_GET 9 pipelined behind WAIT
                CompletableFuture<Boolean> del = CompletableFuture.supplyAsync(() -> s.deleteKey("k"));
                fs.expect(f().u8(7).str("/k")).reply(f().u64(0));
                assertFalse(del.get(10, TimeUnit.SECONDS));
                CompletableFuture<List<byte[]>> mg = CompletableFuture.supplyAsync(() -> s.multiGet(List.of("a", "b")));
                fs.expect(f().u8(5).u64(2).str("/a").str("/b").u8(9).u64(2).str("/a").str("/b"))
                        .reply(f().u8(0).str("1").str("2"));
                assertEquals(2, mg.get(10, TimeUnit.SECONDS).size());
                // a pipelined get that times out drops the connection (the GET reply would follow)
                CompletableFuture<Throwable> g = CompletableFuture.supplyAsync(() -> {
                    try {
                        s.get("late", Duration.ofMillis(200));
                        return null;
                    } catch (RuntimeException e) {
                        return e;
                    }
                });
                fs.expect(f().u8(5).u64(1).str("/late").u8(2).str("/late"));
                Throwable t = g.get(10, TimeUnit.SECONDS);
                assertTrue(t instanceof CommTimeoutException && t.getMessage().contains("late"), String.valueOf(t));
                fs.expectClientClosed();
            }
        }
    }

    @Test
    void aDeclaredMemberSendsNothingNewToATorchServer() throws Exception {
        try (FakeServer fs = new FakeServer()) {
            CompletableFuture<TcpStore> cf = CompletableFuture.supplyAsync(() -> TcpStore.connect(cfg(fs,
                    TcpStoreDialect.TORCH_1_13).member("job-x", 3).build()));
            fs.accept().expect(PROBE).reply(hex("01")); // a torch server: NOT_READY
            TcpStore s = cf.get(10, TimeUnit.SECONDS);
            assertFalse(s.isDeclaredMember());
            // the next bytes are the user's request, not a declaration
            CompletableFuture<Long> add = CompletableFuture.supplyAsync(() -> s.add("n", 1));
            fs.expect(f().u8(3).str("/n").u64(1)).reply(f().u64(1));
            assertEquals(1L, add.get(10, TimeUnit.SECONDS));
            s.close();
            fs.expectClientClosed(); // and no goodbye either
        }
    }

    @Test
    void aDeclaredMemberAgainstAJcommServerDeclaresAfterTheProbeAndSaysGoodbyeOnClose() throws Exception {
        byte[] declaration = f().u8(4).u64(3).str("\0jcomm-member/v1").str("job-x").u64(4).u32(3).bytes();
        byte[] goodbye = f().u8(4).u64(1).str("\0jcomm-goodbye/v1").bytes();
        try (FakeServer fs = new FakeServer()) {
            TcpStoreConfig config = cfg(fs, TcpStoreDialect.TORCH_1_13).member("job-x", 3).rank(3).build();
            CompletableFuture<TcpStore> cf = CompletableFuture.supplyAsync(() -> TcpStore.connect(config));
            fs.accept().expect(PROBE).reply(hex("00")).expect(DURABLE).expect(declaration).reply(hex("01 00"));
            TcpStore s = cf.get(10, TimeUnit.SECONDS);
            assertTrue(s.isDeclaredMember());
            // the member-failure reply to a WAIT: FD + dead rank; the client drops the connection
            CompletableFuture<Throwable> w = CompletableFuture.supplyAsync(() -> {
                try {
                    s.wait(List.of("k"), Duration.ofSeconds(10));
                    return null;
                } catch (RuntimeException e) {
                    return e;
                }
            });
            fs.expect(f().u8(5).u64(1).str("/k")).reply(hex("FD 05000000"));
            Throwable t = w.get(10, TimeUnit.SECONDS);
            assertTrue(t instanceof io.jcomm.api.PeerFailureException, String.valueOf(t));
            assertEquals(5, ((io.jcomm.api.PeerFailureException) t).peerRank());
            assertTrue(t.getMessage().contains("rank 5 of job job-x left the store without a goodbye (process died?) "
                    + "while this rank waited for keys [k]"), t.getMessage());
            fs.expect(goodbye).expectClientClosed(); // a drop of a declared connection says goodbye too
            // reconnect: probe and declaration again, then close says goodbye
            CompletableFuture<Long> n = CompletableFuture.supplyAsync(s::numKeys);
            fs.accept().expect(PROBE).reply(hex("00")).expect(DURABLE).expect(declaration).reply(hex("02 00"));
            fs.expect(hex("06")).reply(f().u64(0));
            assertEquals(0L, n.get(10, TimeUnit.SECONDS));
            s.close();
            fs.expect(goodbye).expectClientClosed();
        }
    }

    @Test
    void aJcommServerWithoutMemberLivenessLeavesTheClientUndeclared() throws Exception {
        try (FakeServer fs = new FakeServer()) {
            CompletableFuture<TcpStore> cf = CompletableFuture.supplyAsync(() -> TcpStore.connect(cfg(fs,
                    TcpStoreDialect.TORCH_1_13).member("job-x", 0).build()));
            fs.accept().expect(PROBE).reply(hex("00"));
            fs.expect(DURABLE).expect(f().u8(4).u64(3).str("\0jcomm-member/v1").str("job-x").u64(4).u32(0))
                    .reply(hex("01 01"));
            TcpStore s = cf.get(10, TimeUnit.SECONDS);
            assertTrue(s.isJcommServer());
            assertFalse(s.isDeclaredMember());
            s.close();
            fs.expectClientClosed(); // no goodbye for an undeclared connection
        }
    }

    @Test
    void oversizedRepliesAreRefusedBeforeAllocating() throws Exception {
        try (FakeServer fs = new FakeServer()) {
            CompletableFuture<TcpStore> cf = CompletableFuture.supplyAsync(() -> TcpStore.connect(cfg(fs,
                    TcpStoreDialect.TORCH_1_13).maxValueBytes(1024).build()));
            fs.accept().expect(PROBE).reply(hex("01"));
            try (TcpStore s = cf.get(10, TimeUnit.SECONDS)) {
                CompletableFuture<byte[]> cas = CompletableFuture.supplyAsync(() -> s.compareSet("k", new byte[0],
                        new byte[] {1}));
                fs.expect(f().u8(1).str("/k").str(new byte[0]).str(new byte[] {1})).reply(f().u64(Long.MAX_VALUE));
                java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                        () -> cas.get(10, TimeUnit.SECONDS));
                assertTrue(e.getCause() instanceof io.jcomm.api.ProtocolException, String.valueOf(e.getCause()));
                fs.expectClientClosed();
            }
        }
    }

    @Test
    void againstADurableServerAChangeCarriesARequestIdAndIsResentWithTheSameOneAfterABrokenConnection()
            throws Exception {
        byte[] tagPrefix = f().u8(4).u64(2).str("\0jcomm-req/v1").u64(24).bytes();
        byte[] addFrame = f().u8(3).str("/n").u64(5).bytes();
        try (FakeServer fs = new FakeServer()) {
            CompletableFuture<TcpStore> cf = CompletableFuture.supplyAsync(() -> TcpStore.connect(cfg(fs,
                    TcpStoreDialect.TORCH_1_13).timeout(Duration.ofSeconds(10)).build()));
            fs.accept().expect(PROBE).reply(hex("00")).expect(DURABLE).reply(hex("00")); // durable
            try (TcpStore s = cf.get(10, TimeUnit.SECONDS)) {
                CompletableFuture<Long> add = CompletableFuture.supplyAsync(() -> s.add("n", 5));
                fs.expect(tagPrefix);
                byte[] id = fs.in.readNBytes(24);
                fs.expect(addFrame);
                fs.s.close(); // the server died before replying
                // the client reconnects, asks again, and resends the change with the same request id
                fs.accept().expect(PROBE).reply(hex("00")).expect(DURABLE).reply(hex("00"));
                fs.expect(tagPrefix).expect(id).expect(addFrame).reply(f().u8(0).u64(5));
                assertEquals(5L, add.get(10, TimeUnit.SECONDS));
                // the next change has the next sequence number, same client id
                CompletableFuture<Void> set = CompletableFuture.runAsync(() -> s.set("k", new byte[] {1}));
                fs.expect(tagPrefix);
                byte[] id2 = fs.in.readNBytes(24);
                assertArrayEquals(java.util.Arrays.copyOf(id, 16), java.util.Arrays.copyOf(id2, 16));
                assertEquals(java.nio.ByteBuffer.wrap(id, 16, 8).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong() + 1,
                        java.nio.ByteBuffer.wrap(id2, 16, 8).order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong());
                // a set waits for the acknowledgment: a refusal is a typed error, the connection stays
                fs.expect(f().u8(0).str("/k").str(new byte[] {1})).reply(f().u8(0xFE).u32(10).bytes());
                fs.reply("store full".getBytes(StandardCharsets.UTF_8));
                java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                        () -> set.get(10, TimeUnit.SECONDS));
                assertTrue(e.getCause() instanceof StoreRefusedException && e.getCause().getMessage().contains(
                        "refused set: store full"), String.valueOf(e.getCause()));
                CompletableFuture<Long> n = CompletableFuture.supplyAsync(s::numKeys);
                fs.expect(hex("06")).reply(f().u64(3));
                assertEquals(3L, n.get(10, TimeUnit.SECONDS));
            }
        }
    }

    @Test
    void reconnectNeverAsksNothingAndTagsNothing() throws Exception {
        try (FakeServer fs = new FakeServer()) {
            CompletableFuture<TcpStore> cf = CompletableFuture.supplyAsync(() -> TcpStore.connect(cfg(fs,
                    TcpStoreDialect.TORCH_1_13).reconnect(TcpStoreConfig.Reconnect.NEVER).build()));
            fs.accept().expect(PROBE).reply(hex("00"));
            try (TcpStore s = cf.get(10, TimeUnit.SECONDS)) {
                CompletableFuture<Long> add = CompletableFuture.supplyAsync(() -> s.add("n", 1));
                fs.expect(f().u8(3).str("/n").u64(1)).reply(f().u64(1));
                assertEquals(1L, add.get(10, TimeUnit.SECONDS));
            }
        }
    }
}
