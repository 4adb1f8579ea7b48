package io.jcomm.kvcache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferOptions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Publisher and subscribers over kv-transfer's tcp transport and a store server (agents in this JVM). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KvEventsTest {

    private static TcpStore client(TcpStoreServer s) {
        return TcpStore.connect(TcpStoreConfig.builder().host("127.0.0.1").port(s.port()).timeout(Duration.ofSeconds(10)).build());
    }

    private static TransferAgent agent(TcpStore store, String name) {
        return TransferAgent.open(store, TransferOptions.builder(name).namespace("t").transports(Set.of("tcp"))
                .timeout(Duration.ofSeconds(10)).build());
    }

    private static boolean await(java.util.function.BooleanSupplier c) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!c.getAsBoolean()) {
            if (System.nanoTime() > end) {
                return false;
            }
            Thread.sleep(10);
        }
        return true;
    }

    @Test
    void subscribersGetASnapshotThenTheEventsAndAClearOnClose() throws Exception {
        int[] p = PrefixTreeTest.prompt(40, 5);
        List<BlockHash> h = PrefixTreeTest.H.fullBlocks(p);
        List<KvEvent> held = new CopyOnWriteArrayList<>(PrefixTreeTest.stored("A", p, 3, KvSlice.whole(8, 2)));
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.defaults());
             TcpStore s1 = client(server); TcpStore s2 = client(server); TcpStore s3 = client(server);
             TransferAgent pubAgent = agent(s1, "pub-0"); TransferAgent subAgent = agent(s2, "sub-0");
             TransferAgent lateAgent = agent(s3, "sub-1")) {
            PrefixTree early = new PrefixTree(1000);
            PrefixTree late = new PrefixTree(1000);
            KvEventPublisher pub = KvEventPublisher.start(pubAgent, s1, "ns", "host-a", () -> List.copyOf(held),
                    Duration.ofMillis(5), 1024);
            try (KvEventSubscriber sub = KvEventSubscriber.start(subAgent, s2, "ns", early)) {
                assertEquals(List.of("pub-0"), sub.publishers(Duration.ofSeconds(5)));
                assertTrue(sub.awaitSnapshots(List.of("pub-0"), Duration.ofSeconds(20)));
                assertEquals(Map.of("A", 3), early.longestPrefix(h));
                for (KvEvent e : PrefixTreeTest.stored("A", p, 6, KvSlice.whole(8, 2)).subList(3, 6)) {
                    held.add(e);
                    pub.publish(e);
                }
                assertTrue(await(() -> early.longestPrefix(h).equals(Map.of("A", 6))));
                try (KvEventSubscriber sub2 = KvEventSubscriber.start(lateAgent, s3, "ns", late)) {
                    assertTrue(sub2.awaitSnapshots(List.of("pub-0"), Duration.ofSeconds(20)));
                    assertEquals(Map.of("A", 6), late.longestPrefix(h));
                    // a malformed batch is dropped and counted
                    pubAgent.notify("sub-1", new byte[] {1, 2, 3}, Duration.ofSeconds(5)).await();
                    assertTrue(await(() -> sub2.malformed() == 1));
                    pub.close();
                    assertTrue(await(() -> late.size() == 0 && early.size() == 0), "Cleared on close");
                }
                assertTrue(sub.publishers(Duration.ofSeconds(5)).isEmpty(), "withdrawn");
            } finally {
                pub.close();
            }
        }
    }

    @Test
    void aPublisherOrSubscriberKilledWhileListingItselfHidesNoLaterOne() throws Exception {
        int[] p = PrefixTreeTest.prompt(40, 5);
        List<BlockHash> h = PrefixTreeTest.H.fullBlocks(p);
        List<KvEvent> held = List.copyOf(PrefixTreeTest.stored("A", p, 2, KvSlice.whole(8, 2)));
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.defaults());
             TcpStore s1 = client(server); TcpStore s2 = client(server);
             TransferAgent pubAgent = agent(s1, "pub-0"); TransferAgent subAgent = agent(s2, "sub-0")) {
            // a publisher and a subscriber each counted their entry and died before writing it
            s1.add("ns/kv-events/publishers/count", 1);
            s1.add("ns/kv-events/subscribers/count", 1);
            PrefixTree tree = new PrefixTree(1000);
            KvEventPublisher pub = KvEventPublisher.start(pubAgent, s1, "ns", "host-a", () -> held,
                    Duration.ofMillis(5), 1024);
            try (KvEventSubscriber sub = KvEventSubscriber.start(subAgent, s2, "ns", tree)) {
                assertEquals(List.of("pub-0"), sub.publishers(Duration.ofSeconds(5)));
                assertTrue(sub.awaitSnapshots(List.of("pub-0"), Duration.ofSeconds(20)), "the publisher found the subscriber");
                assertEquals(Map.of("A", 2), tree.longestPrefix(h));
            } finally {
                pub.close();
            }
        }
    }
}
