package io.jcomm.runtime.mem;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The receive pool's collections, in JVMs with a given collector: young ones where the collector is a copying
 * one (serial, parallel), full ones as the fallback and with G1, the budget kept and held memory intact in
 * every case.
 */
class YoungCollectionTest {

    private static final Pattern COUNTS = Pattern.compile("stream young=(\\d+) full=(\\d+) blocks=(\\d+)[\\s\\S]*?old young=(\\d+) full=(\\d+) available=(\\w+) budget=(\\d+)");

    private static Matcher run(String gc) {
        MultiJvm.Results r;
        try (MultiJvm job = MultiJvm.builder().name("young-" + gc).worldSize(1).mainClass(YoungCollectionWorker.class)
                .jvmArg(gc).maxHeap("512m").deadline(Duration.ofSeconds(60)).start()) {
            r = job.awaitAll();
        }
        r.assertAllSucceeded();
        String out = String.join("\n", r.output(0));
        Matcher m = COUNTS.matcher(out);
        assertTrue(m.find(), out);
        return m;
    }

    @Test
    @Timeout(90)
    void theSerialCollectorGetsYoungCollectionsAndAFullOneOnlyForPromotedTensors() {
        Matcher m = run("-XX:+UseSerialGC");
        assertEquals("true", m.group(6), m.group());
        assertTrue(Long.parseLong(m.group(1)) >= 10, "400 MiB through a 16 MiB pool: young collections " + m.group());
        // none is needed; one or two are allowed for a reference handler not scheduled within 5 ms on a busy host
        assertTrue(Long.parseLong(m.group(2)) <= 2, "full collections while every dropped tensor was young: " + m.group());
        assertTrue(Long.parseLong(m.group(3)) <= 20, "blocks reused: " + m.group());
        assertTrue(Long.parseLong(m.group(5)) >= 1, "promoted tensors need a full collection: " + m.group());
        assertEquals("64", m.group(7), "the default budget with young collections: " + m.group());
    }

    @Test
    @Timeout(90)
    void theParallelCollectorGetsYoungCollections() {
        Matcher m = run("-XX:+UseParallelGC");
        assertEquals("true", m.group(6), m.group());
        assertTrue(Long.parseLong(m.group(1)) >= 10, m.group());
        assertTrue(Long.parseLong(m.group(2)) <= 2, m.group());
    }

    @Test
    @Timeout(90)
    void g1AsksForFullCollections() {
        Matcher m = run("-XX:+UseG1GC");
        assertEquals("false", m.group(6), m.group());
        assertEquals(0, Long.parseLong(m.group(1)), m.group());
        assertTrue(Long.parseLong(m.group(2)) >= 10, m.group());
        assertTrue(Long.parseLong(m.group(3)) <= 20, "blocks reused: " + m.group());
        assertEquals("128", m.group(7), "the default budget with full collections: " + m.group());
    }
}
