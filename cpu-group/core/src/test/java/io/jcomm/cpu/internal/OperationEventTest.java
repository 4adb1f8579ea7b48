package io.jcomm.cpu.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.runtime.jfr.OperationEvent;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.testkit.ThreadRanks;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
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

/**
 * The CPU group's operations appear in a JFR recording as {@code io.jcomm.Operation} events, one per call;
 * a JVM without JFR never loads the event class (a cold-start cost).
 */
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

    @Test
    void aJvmWithoutJfrNeverLoadsTheEventClassAndOneWithJfrDoes() throws Exception {
        String without = childClassLoads(List.of());
        assertTrue(without.contains("child: done"), without);
        assertFalse(without.contains(OperationEvent.class.getName() + " "), "event class loaded without JFR");
        // what loading an event class costs: JFR's type library and an event handler class per event
        assertFalse(without.contains("jdk.jfr.internal.TypeLibrary"), "JFR's framework set up without JFR");
        assertFalse(without.contains("jdk.jfr.internal.handlers."), "an event handler made without JFR");
        String with = childClassLoads(List.of("-XX:StartFlightRecording"));
        assertTrue(with.contains("child: done"), with);
        assertTrue(with.contains(OperationEvent.class.getName() + " "), "no event class with JFR running");
    }

    /** The class-load log and output of a JVM that runs {@link Child} with {@code jvmArgs}. */
    private String childClassLoads(List<String> jvmArgs) throws IOException, InterruptedException {
        List<String> args = new ArrayList<>(jvmArgs);
        // the launchers' flags (Netty's own JFR events off), as commrun and bin/_launch start JVMs
        args.addAll(io.jcomm.api.JvmFlags.REQUIRED);
        args.add("-Xlog:jfr*=off");
        return io.jcomm.testkit.ChildJvm.classLoads(Child.class, args);
    }

    /** Two thread ranks of the tcp group: a barrier, an all-reduce and an asynchronous all-reduce. */
    public static final class Child {
        public static void main(String[] args) {
            try (ThreadRanks ranks = ThreadRanks.start(2, r -> CpuGroupOptions.builder().backend("tcp").groupName("child"),
                    Duration.ofSeconds(20))) {
                ranks.run(g -> {
                    g.barrier();
                    g.allReduce(Tensor.ofFloats(1), ReduceOp.SUM);
                    g.allReduceAsync(Tensor.ofFloats(1), ReduceOp.SUM, g.defaultTimeout()).await();
                }, Duration.ofSeconds(20));
            }
            System.out.println("child: done");
        }
    }
}
