package io.jcomm.cpu.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.internal.jfr.OperationEvent;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.testkit.ThreadRanks;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The CPU group's operations appear in a JFR recording as {@code io.jcomm.Operation} events, one per call. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class OperationEventTest {

    @TempDir
    Path dir;

    @Test
    void aRecordingHoldsOneEventPerCallWithItsGroupRankAndOperation() throws Exception {
        Path file = dir.resolve("ops.jfr");
        try (ThreadRanks ranks = ThreadRanks.start(3, r -> CpuGroupOptions.builder().backend("tcp").groupName("jfr"),
                Duration.ofSeconds(20)); Recording rec = new Recording()) {
            rec.enable(OperationEvent.NAME).withoutThreshold();
            rec.start();
            ranks.run(g -> {
                for (int i = 0; i < 5; i++) {
                    g.barrier();
                }
                for (int i = 0; i < 3; i++) {
                    g.allReduce(Tensor.ofFloats(1), ReduceOp.SUM);
                }
                g.allReduceAsync(Tensor.ofFloats(1), ReduceOp.SUM, g.defaultTimeout()).await();
                g.allReduceAsync(Tensor.ofFloats(1), ReduceOp.SUM, g.defaultTimeout()).await();
            }, Duration.ofSeconds(30));
            rec.stop();
            rec.dump(file);
        }
        List<RecordedEvent> events = RecordingFile.readAllEvents(file).stream()
                .filter(e -> e.getEventType().getName().equals(OperationEvent.NAME) && "jfr".equals(e.getString("group")))
                .toList();
        Map<String, Long> byOp = events.stream().collect(Collectors.groupingBy(
                e -> e.getString("operation") + (e.getBoolean("async") ? "/async" : ""), Collectors.counting()));
        assertEquals(Map.of("barrier", 15L, "allReduce", 9L, "allReduce/async", 6L), byOp);
        for (int r = 0; r < 3; r++) {
            int rr = r;
            assertEquals(10, events.stream().filter(e -> e.getInt("rank") == rr).count(), "rank " + r);
        }
        assertTrue(events.stream().allMatch(e -> e.getString("route").equals("tcp") && e.getString("failure").isEmpty()));
        assertTrue(events.stream().allMatch(e -> !e.getDuration().isNegative()));
    }
}
