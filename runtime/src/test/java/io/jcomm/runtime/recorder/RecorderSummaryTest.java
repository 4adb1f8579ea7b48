package io.jcomm.runtime.recorder;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.jcomm.runtime.recorder.RecorderReader.GroupState;
import io.jcomm.runtime.recorder.RecorderReader.Snapshot;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.api.store.PrefixStore;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * The recorder's byte count, its summary for the store (what peers on other hosts read), and the
 * publisher's rule: write only what changed, once it has stayed for a pass.
 */
class RecorderSummaryTest {

    @Test
    void theGroupCountsTheBytesItsOperationsWereGiven() {
        FlightRecorder rec = FlightRecorder.process();
        assumeTrue(rec != null, "no recorder here (JCOMM_RECORDER=off or no /dev/shm)");
        String name = "bytes-" + System.nanoTime();
        FlightRecorder.Group g = rec.group(name, 1, 4);
        long s1 = g.begin("allReduce", false, System.nanoTime(), 4096);
        g.end("allReduce", s1, true);
        long s2 = g.begin("recvObject", false, System.nanoTime(), 0);
        g.end("recvObject", s2, true, 100);
        long s3 = g.begin("send", true, System.nanoTime(), 8);
        for (Snapshot snap : List.of(rec.snapshot(), RecorderReader.read(rec.file()).orElseThrow())) {
            GroupState s = snap.group(name).orElseThrow();
            assertEquals(4096 + 100 + 8, s.bytes());
            assertEquals(3, s.started());
            assertEquals(2, s.finished());
            assertTrue(s.running() && s.async() && s.op().equals("send") && s.seq() == s3, s.toString());
        }
        g.end("send", s3, true);
    }

    @Test
    void aSummaryCarriesTheStateAndItsAgesToAnotherClock() {
        long now = 5_000_000_000L;
        long epoch = 1_700_000_000_000L;
        GroupState running = new GroupState("pp:0", 1, 2, 412, 411, "recvObject", FlightRecorder.RUNNING, 412,
                now - 9_800_000_000L, 0, false, 1234);
        GroupState idle = new GroupState("world\tx", 1, 4, 19, 19, "allReduce", FlightRecorder.DONE, 19,
                now - 4_000_000_000L, now - 3_000_000_000L, true, 99);
        String text = RecorderSummary.encode(List.of(running, idle), 77, "host B", now, epoch);
        // read 2 s later (by the wall clock) on a host whose nanoTime has another origin
        long there = 123_000_000_000L;
        RecorderSummary.Decoded d = RecorderSummary.decode(text, there, epoch + 2000).orElseThrow();
        assertEquals("host B", d.host());
        assertEquals(77, d.pid());
        assertEquals(2, d.groups().size());
        GroupState r = d.groups().get(0);
        assertEquals("pp:0", r.group());
        assertEquals(there - 11_800_000_000L, r.startNanos());
        assertEquals(1234, r.bytes());
        GroupState i = d.groups().get(1);
        assertEquals("world x", i.group(), "tabs cannot break the lines");
        assertTrue(i.async() && i.state() == FlightRecorder.DONE && i.seq() == 19);
        assertEquals("in pp:0 recvObject #412 for 11.8 s", RecorderReader.describe(d.groups(), there));
        assertEquals("in no operation; last world x allReduce #19 ended 5.0 s ago",
                RecorderReader.describe(List.of(i), there));
        assertEquals(Optional.empty(), RecorderSummary.decode("something else", there, epoch));
        assertEquals(Optional.empty(), RecorderSummary.decode(text.replace("\t412\t", "\tx\t"), there, epoch));
    }

    @Test
    void fetchReadsWhatIsThereAndWaitsBoundedForWhatIsNot() {
        InMemoryStore store = new InMemoryStore(Duration.ofSeconds(5));
        long t0 = System.nanoTime();
        assertTrue(RecorderSummary.fetch(store, "jcomm-state/1", Duration.ofMillis(200)).isEmpty());
        long waited = System.nanoTime() - t0;
        assertTrue(waited >= 150_000_000L && waited < 3_000_000_000L, "bounded wait: " + waited);
        assertTrue(RecorderSummary.fetch(store, "jcomm-state/1", Duration.ZERO).isEmpty());
        store.set("jcomm-state/1", RecorderSummary.encode(List.of(), 5, "h", System.nanoTime(),
                System.currentTimeMillis()).getBytes(StandardCharsets.UTF_8));
        assertEquals("in no operation yet", RecorderSummary.fetch(store, "jcomm-state/1", Duration.ZERO).orElseThrow()
                .describe());
        store.close();
        assertTrue(RecorderSummary.fetch(store, "jcomm-state/1", Duration.ZERO).isEmpty(), "a closed store: nothing");
    }

    @Test
    void thePublisherWritesAStateOnceItHasStayedAndAgainWhenItChanges() {
        FlightRecorder rec = FlightRecorder.process();
        assumeTrue(rec != null, "no recorder here (JCOMM_RECORDER=off or no /dev/shm)");
        String name = "pub-" + System.nanoTime();
        FlightRecorder.Group g = rec.group(name, 0, 2);
        StatePublisher p = new StatePublisher(false);
        try (InMemoryStore base = new InMemoryStore(Duration.ofSeconds(5))) {
            PrefixStore a = new PrefixStore("gen", base);
            PrefixStore b = new PrefixStore("gen", base);
            StatePublisher.Target ta = p.publishTo(a, "jcomm-state/ab", "gen/@1");
            StatePublisher.Target tb = p.publishTo(b, "jcomm-state/ab", "gen/@1");
            try {
                long now = System.nanoTime();
                long seq = g.begin("allReduce", false);
                p.pass(now);
                p.pass(now + 1);
                String first = new String(base.get("gen/jcomm-state/ab"), StandardCharsets.UTF_8);
                RecorderSummary.Decoded d = RecorderSummary.decode(first).orElseThrow();
                assertTrue(d.describe().contains("in " + name + " allReduce #" + seq + " for "), d.describe());
                g.end("allReduce", seq, true);
                p.pass(now + 2); // changed: not written before it stays
                assertEquals(first, new String(base.get("gen/jcomm-state/ab"), StandardCharsets.UTF_8));
                p.pass(now + 3);
                String second = new String(base.get("gen/jcomm-state/ab"), StandardCharsets.UTF_8);
                assertFalse(second.equals(first));
                assertTrue(RecorderSummary.decode(second).orElseThrow().snapshot().group(name).orElseThrow().state()
                        == FlightRecorder.DONE);
            } finally {
                ta.close();
                tb.close();
            }
        }
    }
}
