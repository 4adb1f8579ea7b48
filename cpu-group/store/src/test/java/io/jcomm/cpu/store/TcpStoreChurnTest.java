package io.jcomm.cpu.store;

import static io.jcomm.cpu.store.RawConn.f;
import static io.jcomm.cpu.store.RawConn.hex;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommTimeoutException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The store's memory under churn: round after round, clients wait for keys that never come and then
 * cancel (torch 2.2+ CANCEL_WAIT), die with their wait pending (a reset), or time out and close (jcomm
 * clients), each setting one of the same keys on the way. After every round the server holds no
 * connection and no pending wait, its keys and stored bytes are those of the first round, and the heap
 * the test JVM keeps after a collection does not grow from the third round to the last.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class TcpStoreChurnTest {

    private static final byte[] VALIDATE = hex("00 CE F7 85 3C");
    private static final int ROUNDS = 12;
    private static final int CLIENTS = 240; // per round: a third of each kind

    private static long heapAfterGc() {
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    @Test
    void clientsThatCancelDieOrTimeOutLeaveNothingBehind() throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(16);
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("churn").build())) {
            long keys = -1;
            long bytes = -1;
            long heap3 = 0;
            long heapLast = 0;
            for (int round = 0; round < ROUNDS; round++) {
                int r = round;
                List<Future<?>> fs = new ArrayList<>();
                for (int i = 0; i < CLIENTS; i++) {
                    int c = i;
                    fs.add(pool.submit(() -> {
                        String never = "/never/" + r + "/" + c;
                        switch (c % 3) {
                            case 0 -> { // waits, cancels, sets, leaves
                                try (RawConn conn = new RawConn(server.port())) {
                                    conn.send(VALIDATE);
                                    conn.send(f().u8(6).u64(1).str(never)).expectSilence(20);
                                    conn.send(hex("0C")).expect(hex("01"));
                                    conn.send(f().u8(1).str("/churn/" + c).str("value-" + c));
                                    conn.send(hex("07")).read(8); // GETNUMKEYS: the set was applied before the close
                                }
                            }
                            case 1 -> { // sets, waits, dies with the wait pending
                                RawConn conn = new RawConn(server.port());
                                conn.send(VALIDATE);
                                conn.send(f().u8(1).str("/churn/" + c).str("value-" + c));
                                // GETNUMKEYS: the set was applied before the reset (a reset drops what the server
                                // has not read yet, so without this a slow server may never see the set)
                                conn.send(hex("07")).read(8);
                                conn.send(f().u8(6).u64(1).str(never)).expectSilence(20);
                                conn.reset();
                            }
                            default -> { // a jcomm client: its wait times out, it sets and closes
                                try (TcpStore s = TcpStore.connect(TcpStoreConfig.builder().port(server.port())
                                        .timeout(Duration.ofSeconds(20)).build())) {
                                    assertThrows(CommTimeoutException.class, () -> s.get(never.substring(1), Duration.ofMillis(20)));
                                    s.set("churn/" + c, ("value-" + c).getBytes(StandardCharsets.US_ASCII));
                                }
                            }
                        }
                        return null;
                    }));
                }
                for (Future<?> f : fs) {
                    f.get(60, TimeUnit.SECONDS);
                }
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                TcpStoreServer.Stats st = server.stats();
                while ((st.connectionsOpen() > 0 || st.pendingWaits() > 0) && System.nanoTime() < end) {
                    Thread.sleep(10);
                    st = server.stats();
                }
                assertEquals(0, st.connectionsOpen(), "round " + round + ": " + st);
                assertEquals(0, st.pendingWaits(), "round " + round + ": " + st);
                if (round == 0) {
                    keys = st.keys();
                    bytes = st.storedBytes();
                    assertTrue(keys >= CLIENTS, st.toString());
                } else {
                    assertEquals(keys, st.keys(), "round " + round + ": the same keys were set again");
                    assertEquals(bytes, st.storedBytes(), "round " + round);
                }
                if (round == 2) {
                    heap3 = heapAfterGc();
                }
                if (round == ROUNDS - 1) {
                    heapLast = heapAfterGc();
                }
            }
            long growth = heapLast - heap3;
            System.out.printf("churn: %d rounds of %d clients; heap after a collection %.1f MiB at round 3, %.1f MiB at the last "
                    + "(%+.1f MiB); %d connections opened in all%n", ROUNDS, CLIENTS, heap3 / 1048576.0, heapLast / 1048576.0,
                    growth / 1048576.0, server.stats().connectionsOpened());
            assertTrue(growth < 8L << 20, "the heap grew by " + growth + " bytes from round 3 to the last");
        } finally {
            pool.shutdownNow();
        }
    }
}
