package io.jcomm.transfer;

import static org.junit.jupiter.api.Assertions.assertTrue;

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

/**
 * A small tcp transfer is not queued behind a large one: several agents in one JVM over real
 * loopback sockets, every byte of every transfer checked.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TcpHeadOfLineTest {

    private static final Set<Permission> RW = EnumSet.of(Permission.READ, Permission.WRITE);
    private static final int LARGE = 64 << 20;
    private static final int SMALL = 4 << 10;
    private static final int CHUNK = 1 << 20;
    private final InMemoryStore store = new InMemoryStore(Duration.ofSeconds(10));
    private final List<TransferAgent> agents = new ArrayList<>();

    private TransferAgent agent(String name, int streams) {
        TransferAgent a = TransferAgent.open(store, TransferOptions.builder(name).transports(Set.of("tcp"))
                .tcpStreams(streams).tcpChunkBytes(CHUNK).timeout(Duration.ofSeconds(60)).build());
        agents.add(a);
        return a;
    }

    @AfterEach
    void close() {
        for (TransferAgent a : agents) {
            a.close();
        }
        store.close();
    }

    /** One stream, a 64 MiB write in 64 pieces, then 4 KiB writes: each lands while the large one is still going. */
    @Test
    void smallWriteOvertakesALargeOneOnTheSameStream() {
        TransferAgent owner = agent("owner", 1);
        TransferAgent init = agent("init", 1);
        MemoryRegion bigTarget = owner.register(ByteBuffer.allocateDirect(LARGE), RW);
        MemoryRegion smallTarget = owner.register(ByteBuffer.allocateDirect(SMALL * 8), RW);
        MemoryRegion bigSrc = init.register(ByteBuffer.allocateDirect(LARGE), Set.of());
        MemoryRegion smallSrc = init.register(ByteBuffer.allocateDirect(SMALL * 8), Set.of());
        init.write(smallSrc.slice(0, SMALL), smallTarget.descriptor().slice(0, SMALL), null).await(); // connected, warm
        for (int round = 0; round < 3; round++) {
            TransferAgentTest.fill(bigSrc.buffer(), 7 + round);
            TransferAgentTest.fill(smallSrc.buffer(), 11 + round);
            TransferHandle big = init.write(bigSrc.all(), bigTarget.descriptor(), null, Duration.ofSeconds(60));
            int overtook = 0;
            for (int i = 0; i < 8; i++) {
                init.write(smallSrc.slice(i * SMALL, SMALL), smallTarget.descriptor().slice(i * SMALL, SMALL), null,
                        Duration.ofSeconds(30)).await();
                if (!big.isDone()) {
                    overtook++;
                }
            }
            big.await(Duration.ofSeconds(60));
            assertTrue(overtook > 0, "round " + round + ": a 4 KiB write issued after a 64 MiB one finished only after it");
            TransferAgentTest.assertFilled(bigTarget.buffer(), 0, LARGE, 7 + round, 0);
            TransferAgentTest.assertFilled(smallTarget.buffer(), 0, SMALL * 8, 11 + round, 0);
        }
    }

    /**
     * Many to one: three initiators stream 64 MiB writes into one owner while a fourth, with a large
     * write of its own in flight, issues 4 KiB writes; every one lands before its own large write is
     * done and every byte is where it belongs. Reads take the same lanes.
     */
    @Test
    void manyInitiatorsIntoOneOwnerSmallWritesAndReadsAreNotStarved() throws Exception {
        TransferAgent owner = agent("decode", 2);
        int senders = 3;
        List<MemoryRegion> targets = new ArrayList<>();
        List<TransferAgent> inits = new ArrayList<>();
        List<MemoryRegion> srcs = new ArrayList<>();
        for (int p = 0; p <= senders; p++) {
            targets.add(owner.register(ByteBuffer.allocateDirect(LARGE), RW));
            TransferAgent a = agent("prefill-" + p, 2);
            inits.add(a);
            MemoryRegion src = a.register(ByteBuffer.allocateDirect(LARGE), Set.of());
            srcs.add(src);
        }
        MemoryRegion smallTarget = owner.register(ByteBuffer.allocateDirect(SMALL * 16), RW);
        TransferAgent mixed = inits.get(senders);
        MemoryRegion smallSrc = mixed.register(ByteBuffer.allocateDirect(SMALL * 16), Set.of());
        MemoryRegion readBack = mixed.register(ByteBuffer.allocateDirect(SMALL), Set.of());
        for (int round = 0; round < 2; round++) {
            for (int p = 0; p <= senders; p++) {
                TransferAgentTest.fill(srcs.get(p).buffer(), 10 * round + p);
            }
            TransferAgentTest.fill(smallSrc.buffer(), 42 + round);
            List<TransferHandle> bigs = new ArrayList<>();
            for (int p = 0; p <= senders; p++) {
                bigs.add(inits.get(p).write(srcs.get(p).all(), targets.get(p).descriptor(), null, Duration.ofSeconds(90)));
            }
            int overtook = 0;
            for (int i = 0; i < 16; i++) {
                mixed.write(smallSrc.slice(i * SMALL, SMALL), smallTarget.descriptor().slice(i * SMALL, SMALL), null,
                        Duration.ofSeconds(30)).await();
                mixed.read(readBack.all(), smallTarget.descriptor().slice(i * SMALL, SMALL)).await(Duration.ofSeconds(30));
                TransferAgentTest.assertFilled(readBack.buffer(), 0, SMALL, 42 + round, i * SMALL);
                if (!bigs.get(senders).isDone()) {
                    overtook++;
                }
            }
            for (TransferHandle h : bigs) {
                h.await(Duration.ofSeconds(90));
            }
            assertTrue(overtook > 0, "round " + round + ": small transfers finished only after the large one beside them");
            for (int p = 0; p <= senders; p++) {
                TransferAgentTest.assertFilled(targets.get(p).buffer(), 0, LARGE, 10 * round + p, 0);
            }
            TransferAgentTest.assertFilled(smallTarget.buffer(), 0, SMALL * 16, 42 + round, 0);
        }
    }
}
