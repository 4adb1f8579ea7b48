package io.jcomm.cpu.store;

import static io.jcomm.cpu.store.RawConn.f;
import static io.jcomm.cpu.store.RawConn.hex;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Byte-exact protocol tests: exact request bytes over a raw socket, exact reply bytes compared.
 * Legacy numbering (torch 1.13/2.0): SET 0, COMPARE_SET 1, GET 2, ADD 3, CHECK 4, WAIT 5,
 * GETNUMKEYS 6, WATCH_KEY 7, DELETE_KEY 8; torch 2.1: ... DELETE_KEY 7, APPEND 8, MULTI_GET 9,
 * MULTI_SET 10, CANCEL_WAIT 11; torch 2.2+: VALIDATE 0, SET 1 ... CANCEL_WAIT 12, PING 13.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class TcpStoreWireTest {

    private static final byte[] VALIDATE = hex("00 CE F7 85 3C");

    private TcpStoreServer server;

    @BeforeEach
    void start() {
        server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("wire-test").build());
    }

    @AfterEach
    void stop() {
        server.close();
    }

    private RawConn conn() throws Exception {
        return new RawConn(server.port());
    }

    @Test
    void legacyFramesByteExact() throws Exception {
        try (RawConn c = conn()) {
            // SET "/k" = "v": no reply
            c.send(hex("00 0200000000000000 2F6B 0100000000000000 76"));
            // GET "/k" -> u64 1, "v"
            c.send(hex("02 0200000000000000 2F6B")).expect(hex("0100000000000000 76"));
            // ADD "/n" 5 -> i64 5; ADD -7 -> -2
            c.send(hex("03 0200000000000000 2F6E 0500000000000000")).expect(hex("0500000000000000"));
            c.send(f().u8(3).str("/n").u64(-7)).expect(f().u64(-2));
            // the ADD value is stored as decimal ASCII
            c.send(hex("02 0200000000000000 2F6E")).expect(hex("0200000000000000 2D32"));
            // COMPARE_SET "/k" expected "v" desired "w" -> "w"; wrong expected -> current
            c.send(f().u8(1).str("/k").str("v").str("w")).expect(f().str("w"));
            c.send(f().u8(1).str("/k").str("zz").str("q")).expect(f().str("w"));
            // missing key with non-empty expected: returns expected
            c.send(f().u8(1).str("/none").str("e").str("d")).expect(f().str("e"));
            // CHECK 2 keys: READY 00 / NOT_READY 01
            c.send(hex("04 0200000000000000 0200000000000000 2F6B 0200000000000000 2F6E")).expect(hex("00"));
            c.send(f().u8(4).u64(2).str("/k").str("/none")).expect(hex("01"));
            // WAIT on present keys: STOP_WAITING 00 at once
            c.send(f().u8(5).u64(1).str("/k")).expect(hex("00"));
            // GETNUMKEYS -> i64 2
            c.send(hex("06")).expect(hex("0200000000000000"));
            // DELETE_KEY "/k" -> 1, again -> 0
            c.send(hex("08 0200000000000000 2F6B")).expect(hex("0100000000000000"));
            c.send(hex("08 0200000000000000 2F6B")).expect(hex("0000000000000000"));
            c.send(hex("06")).expect(hex("0100000000000000"));
        }
    }

    @Test
    void validateSelectsTorch22NumberingAndPingEchoes() throws Exception {
        try (RawConn c = conn()) {
            c.send(VALIDATE);
            // PING 13 with nonce -> same 4 bytes
            c.send(hex("0D 78563412")).expect(hex("78563412"));
            // SET 1, GET 3
            c.send(f().u8(1).str("/a").str("hello"));
            c.send(f().u8(3).str("/a")).expect(f().str("hello"));
            // ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7
            c.send(f().u8(4).str("/c").u64(3)).expect(f().u64(3));
            c.send(f().u8(5).u64(1).str("/c")).expect(hex("00"));
            c.send(f().u8(6).u64(2).str("/a").str("/c")).expect(hex("00"));
            c.send(hex("07")).expect(f().u64(2));
            // APPEND 9, MULTI_SET 11, MULTI_GET 10
            c.send(f().u8(9).str("/a").str(" world"));
            c.send(f().u8(11).u64(2).str("/x").str("1").str("/y").str("22"));
            c.send(f().u8(10).u64(3).str("/a").str("/y").str("/x"))
                    .expect(f().str("hello world").str("22").str("1"));
            // COMPARE_SET 2, DELETE_KEY 8
            c.send(f().u8(2).str("/x").str("1").str("one")).expect(f().str("one"));
            c.send(f().u8(8).str("/y")).expect(f().u64(1));
            // CANCEL_WAIT 12 without a pending wait: WAIT_CANCELED 01
            c.send(hex("0C")).expect(hex("01"));
            // VALIDATE may come again with the right magic (no reply)
            c.send(VALIDATE).send(hex("07")).expect(f().u64(3));
        }
    }

    @Test
    void everyGenerationIsServedAtOnceOnTheSameKeys() throws Exception {
        try (RawConn legacy = conn(); RawConn t21 = conn(); RawConn t22 = conn(); RawConn t25 = conn()) {
            t22.send(VALIDATE);
            t25.send(VALIDATE).send(hex("0D 01020304")).expect(hex("01020304"));
            legacy.send(f().u8(0).str("/from113").str("a"));
            t21.send(f().u8(10).u64(1).str("/from21").str("b")); // MULTI_SET marks 2.1
            t22.send(f().u8(1).str("/from22").str("c"));
            t25.send(f().u8(4).str("/count").u64(1)).expect(f().u64(1));
            // byte 3 is ADD on a legacy connection and GET on a 2.2+ one
            legacy.send(f().u8(3).str("/count").u64(1)).expect(f().u64(2));
            t22.send(f().u8(6).u64(3).str("/from113").str("/from21").str("/count")).expect(hex("00"));
            t22.send(f().u8(3).str("/count")).expect(f().str("2"));
            t21.send(f().u8(9).u64(3).str("/from113").str("/from21").str("/from22"))
                    .expect(f().str("a").str("b").str("c"));
            legacy.send(f().u8(5).u64(1).str("/from22")).expect(hex("00"));
            legacy.send(f().u8(2).str("/from21")).expect(f().str("b"));
            t25.send(hex("07")).expect(f().u64(4));
        }
    }

    @Test
    void torch21IsRecognisedByItsCommands() throws Exception {
        try (RawConn c = conn()) {
            c.send(f().u8(0).str("/k").str("v"));
            // CANCEL_WAIT 11 marks 2.1 (no pending wait: WAIT_CANCELED)
            c.send(hex("0B")).expect(hex("01"));
            // now 7 = DELETE_KEY and 8 = APPEND
            c.send(f().u8(8).str("/k").str("+"));
            c.send(f().u8(2).str("/k")).expect(f().str("v+"));
            c.send(f().u8(7).str("/k")).expect(f().u64(1));
            c.send(hex("06")).expect(f().u64(0));
        }
    }

    @Test
    void legacyByte8IsAppendWhenMoreBytesFollowTheKeyElseDelete() throws Exception {
        try (RawConn w = conn(); RawConn del = conn(); RawConn app = conn()) {
            w.send(f().u8(0).str("/a").str("x")).send(f().u8(0).str("/b").str("y"));
            w.send(hex("06")).expect(f().u64(2));
            // torch 1.13 DELETE_KEY: the key alone, then the client waits for the reply
            del.send(f().u8(8).str("/a")).expect(f().u64(1));
            // torch 2.1 APPEND: key and value in one write
            app.send(f().u8(8).str("/b").str("z"));
            app.send(f().u8(2).str("/b")).expect(f().str("yz"));
            // the APPEND connection is now 2.1: byte 7 deletes
            app.send(f().u8(7).str("/b")).expect(f().u64(1));
            w.send(hex("06")).expect(f().u64(0));
        }
    }

    @Test
    void torch113WatchKeyOnTheCallbackConnection() throws Exception {
        try (RawConn cb = conn(); RawConn main = conn()) {
            // first command 7 on a fresh legacy connection: WATCH_KEY -> KEY_CALLBACK_REGISTERED 03
            cb.send(f().u8(7).str("/w")).expect(hex("03"));
            main.send(f().u8(0).str("/w").str("1"));
            // KEY_CREATED 01, key, old "", new "1"
            cb.expect(f().u8(1).str("/w").str("").str("1"));
            main.send(f().u8(3).str("/w").u64(4)).expect(f().u64(5));
            // KEY_UPDATED 00, old "1", new "5"
            cb.expect(f().u8(0).str("/w").str("1").str("5"));
            main.send(f().u8(8).str("/w")).expect(f().u64(1));
            // KEY_DELETED 02, old "5", new ""
            cb.expect(f().u8(2).str("/w").str("5").str(""));
            main.send(f().u8(0).str("/other").str("x"));
            cb.expectSilence(100);
        }
    }

    @Test
    void legacyWaitIsDroppedWhenTheClientSendsAnotherCommand() throws Exception {
        try (RawConn c = conn(); RawConn w = conn()) {
            c.send(f().u8(5).u64(1).str("/late")).expectSilence(150);
            // the torch 1.13 client timed out and goes on: its next reply must be exactly that reply
            c.send(hex("06")).expect(f().u64(0));
            w.send(f().u8(0).str("/late").str("1"));
            c.expectSilence(150); // no stale STOP_WAITING
            c.send(f().u8(2).str("/late")).expect(f().str("1"));
            assertEquals(1, server.stats().droppedWaits());
        }
    }

    @Test
    void waitsAreServedWhenKeysAppearIncludingDuplicatesAndAdd() throws Exception {
        try (RawConn c = conn(); RawConn w = conn()) {
            c.send(f().u8(5).u64(3).str("/p").str("/q").str("/p")).expectSilence(100);
            w.send(f().u8(0).str("/p").str("1"));
            c.expectSilence(100);
            w.send(f().u8(3).str("/q").u64(1)).expect(f().u64(1));
            c.expect(hex("00"));
        }
    }

    @Test
    void cancelWaitOn22AndTheLateStopWaitingRace() throws Exception {
        try (RawConn c = conn(); RawConn w = conn()) {
            c.send(VALIDATE);
            c.send(f().u8(6).u64(1).str("/k1")).expectSilence(100);
            c.send(hex("0C")).expect(hex("01"));
            w.send(f().u8(0).str("/k1").str("v"));
            c.expectSilence(100);
            // the wait completes before the cancel arrives: STOP_WAITING then WAIT_CANCELED
            c.send(f().u8(6).u64(1).str("/k2")).expectSilence(50);
            w.send(f().u8(0).str("/k2").str("v"));
            c.expect(hex("00"));
            c.send(hex("0C")).expect(hex("01"));
            c.send(hex("07")).expect(f().u64(2));
        }
    }

    @Test
    void probedJcommConnectionHoldsCommandsBehindAPendingWait() throws Exception {
        try (RawConn c = conn(); RawConn w = conn()) {
            c.send(f().u8(4).u64(1).str(new String(new char[] {0}) + "jcomm-store/v1")).expect(hex("00"));
            // WAIT + GET pipelined in one write: the GET waits behind the WAIT
            c.send(f().u8(5).u64(1).str("/late").u8(2).str("/late")).expectSilence(150);
            w.send(f().u8(0).str("/late").str("value"));
            c.expect(f().u8(0).str("value"));
            // the probe switched the connection to 2.1 numbering: 9 = MULTI_GET
            c.send(f().u8(9).u64(1).str("/late")).expect(f().str("value"));
        }
    }

    @Test
    void badInputClosesOnlyThatConnection() throws Exception {
        try (RawConn good = conn()) {
            good.send(f().u8(0).str("/alive").str("1"));
            byte[][] bad = {
                hex("42"), // unknown legacy command
                hex("0C"), // 12 is no legacy command
                f().raw(VALIDATE).u8(14).bytes(), // 2.8 QUEUE_PUSH is not served
                f().u8(0).u64(8193).bytes(), // key over 8 KiB: refused before the key arrives
                f().u8(0).str("/k").u64(8L * 1024 * 1024 + 1).bytes(), // value over 8 MiB
                f().u8(0).u64(-1).bytes(), // 2^64-1 byte key
                f().u8(4).u64(128 * 1024 + 1).bytes(), // too many keys
                f().u8(2).str("/missing").bytes(), // GET of a missing key (torch closes too)
                f().raw(VALIDATE).u8(0).u32(0x12345678).bytes(), // VALIDATE with a wrong magic
            };
            for (byte[] b : bad) {
                try (RawConn c = conn()) {
                    c.send(b).expectClosed();
                }
                good.send(f().u8(2).str("/alive")).expect(f().str("1"));
            }
            good.send(f().u8(0).str("/text").str("abc"));
            try (RawConn c = conn()) {
                c.send(f().u8(3).str("/text").u64(1)).expectClosed(); // ADD on a non-integer
            }
            good.send(f().u8(6)).expect(f().u64(2));
            assertTrue(server.stats().connectionsFaulted() >= 10, server.stats().toString());
        }
    }

    @Test
    void limitsComeFromTheImmutableConfig() throws Exception {
        try (TcpStoreServer small = TcpStoreServer.start(TcpStoreServerConfig.builder().maxKeyBytes(16)
                .maxValueBytes(32).maxKeysPerRequest(2).maxRequestBytes(100).maxStoreBytes(60).build())) {
            try (RawConn c = new RawConn(small.port())) {
                c.send(f().u8(0).str("/0123456789abcd").str("v")); // 15-byte key: fine
                c.send(f().u8(6)).expect(f().u64(1));
                c.send(f().u8(4).u64(2).str("/a").str("/b")).expect(hex("01"));
            }
            try (RawConn c = new RawConn(small.port())) {
                c.send(f().u8(0).u64(17)).expectClosed();
            }
            try (RawConn c = new RawConn(small.port())) {
                c.send(f().u8(0).str("/k").u64(33)).expectClosed();
            }
            try (RawConn c = new RawConn(small.port())) {
                c.send(f().u8(4).u64(3)).expectClosed();
            }
            try (RawConn c = new RawConn(small.port())) {
                // fits each limit, but the store would exceed maxStoreBytes (60)
                c.send(f().u8(0).str("/big1").str(new byte[30]));
                c.send(f().u8(0).str("/big2").str(new byte[30])).expectClosed();
            }
            try (TcpStore s = TcpStore.connect(TcpStoreConfig.builder().port(small.port())
                    .timeout(Duration.ofSeconds(5)).build())) {
                assertEquals(2, s.numKeys());
            }
        }
    }

    @Test
    void tokenServerAnswersTorchClientsWithARefusal() throws Exception {
        byte[] token = "a-job-token-of-enough-length".getBytes(StandardCharsets.US_ASCII);
        try (TcpStoreServer ts = TcpStoreServer.start(TcpStoreServerConfig.builder().token(token).build())) {
            try (RawConn c = new RawConn(ts.port())) {
                c.send(f().u8(3).str("init/").u64(1)).expect(hex("FA 03")).expectClosed();
            }
            try (RawConn c = new RawConn(ts.port())) {
                c.send(VALIDATE).expect(hex("FA 03")).expectClosed();
            }
            try (RawConn c = new RawConn(ts.port())) {
                // a hello with a wrong proof: challenge, then FA 01 and close
                c.send(f().u8(0xFA).raw("JCS1".getBytes(StandardCharsets.US_ASCII)).raw(new byte[32]));
                assertArrayEquals(hex("FA 00"), c.read(2));
                c.read(64);
                c.send(new byte[32]).expect(hex("FA 01")).expectClosed();
            }
        }
        // a hello to a server without a token: FA 02 and close
        try (RawConn c = conn()) {
            c.send(f().u8(0xFA).raw("JCS1".getBytes(StandardCharsets.US_ASCII)).raw(new byte[32]))
                    .expect(hex("FA 02")).expectClosed();
        }
    }
}
