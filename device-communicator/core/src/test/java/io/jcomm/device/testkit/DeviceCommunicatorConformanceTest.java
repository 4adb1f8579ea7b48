package io.jcomm.device.testkit;

import io.jcomm.api.ProcessGroup;
import io.jcomm.api.device.DeviceCommunicator;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * The conformance kit of the {@link DeviceCommunicator} SPI with ranks as threads of this JVM, over a
 * {@link ThreadRanksGroup} control plane. A provider re-runs it by extending this class (Netty
 * style) and saying how to build a world; each world size becomes a container with one test per
 * case of {@link ConformanceCases}, then the shrink cases ({@link ConformanceRunner#runShrink}).
 *
 * <p>The same cases run across real JVMs through {@link ConformanceRunner} in a worker main (see the
 * integration tests); that is what proves distributed behaviour. This class is for logic and for
 * providers whose library can be faked in-process.
 */
public abstract class DeviceCommunicatorConformanceTest {

    /**
     * A communicator and the memory the kit uses for it, on one rank, and the CPU group it runs over
     * when that is not the kit's stand-in (the shrink case shrinks it), else null.
     */
    public record RankSetup(DeviceCommunicator comm, DeviceMemory memory, ProcessGroup cpuGroup) {

        public RankSetup(DeviceCommunicator comm, DeviceMemory memory) {
            this(comm, memory, null);
        }
    }

    /** Builds the ranks of one world; {@link #rank} is called on each rank's thread, concurrently. */
    public interface World extends AutoCloseable {
        RankSetup rank(ProcessGroup cpuGroup);

        @Override
        default void close() {
        }
    }

    /** World sizes to run. */
    protected int[] worldSizes() {
        return new int[] {1, 2, 3, 4};
    }

    /** Timeout of the stand-in CPU group's collectives and of one world's whole run (x4). */
    protected Duration timeout() {
        return Duration.ofSeconds(20);
    }

    /** The stand-in CPU groups of one world, one per rank. */
    protected List<ThreadRanksGroup> cpuGroups(String name, int worldSize) {
        return ThreadRanksGroup.create(name, worldSize, timeout());
    }

    /** A new world of {@code worldSize} ranks. */
    protected abstract World newWorld(int worldSize);

    @TestFactory
    Stream<DynamicNode> conformance() {
        List<String> names = new ArrayList<>(ConformanceRunner.caseNames());
        names.addAll(ConformanceRunner.shrinkCaseNames());
        return Arrays.stream(worldSizes()).mapToObj(w -> DynamicContainer.dynamicContainer("world size " + w,
                Stream.of(w).flatMap(ws -> {
                    List<Map<String, String>> perRank = runWorld(ws);
                    List<DynamicNode> tests = new ArrayList<>();
                    for (String name : names) {
                        tests.add(DynamicTest.dynamicTest(name, () -> assertPassed(name, perRank)));
                    }
                    return tests.stream();
                })));
    }

    private static void assertPassed(String name, List<Map<String, String>> perRank) {
        StringBuilder sb = new StringBuilder();
        for (int r = 0; r < perRank.size(); r++) {
            Map<String, String> res = perRank.get(r);
            if (!res.containsKey(name)) {
                sb.append("\n  rank ").append(r).append(": no result (the rank failed before this case)");
            } else if (res.get(name) != null) {
                sb.append("\n  rank ").append(r).append(": ").append(res.get(name));
            }
        }
        if (sb.length() > 0) {
            throw new AssertionError("case '" + name + "' failed:" + sb);
        }
    }

    /** Runs every case on {@code worldSize} threads; a rank that cannot even start reports that. */
    private List<Map<String, String>> runWorld(int worldSize) {
        List<ThreadRanksGroup> groups = cpuGroups("conformance-" + worldSize, worldSize);
        List<ThreadRanksGroup> shrinkGroups = cpuGroups("conformance-shrink-" + worldSize, worldSize);
        AtomicReferenceArray<Map<String, String>> results = new AtomicReferenceArray<>(worldSize);
        PrintStream log = System.out;
        try (World world = newWorld(worldSize)) {
            List<Thread> threads = new ArrayList<>();
            for (int r = 0; r < worldSize; r++) {
                int rank = r;
                Thread t = new Thread(() -> {
                    try {
                        RankSetup setup = world.rank(groups.get(rank));
                        try {
                            Map<String, String> res = new LinkedHashMap<>(
                                    ConformanceRunner.run(setup.comm(), setup.memory(), groups.get(rank), null));
                            if (!res.containsValue(ConformanceRunner.NOT_RUN)) {
                                // last, on a communicator and CPU group of their own (the cases closed the first;
                                // a shrink aborts both)
                                RankSetup fresh = world.rank(shrinkGroups.get(rank));
                                try {
                                    res.putAll(ConformanceRunner.runShrink(fresh.comm(), fresh.memory(),
                                            fresh.cpuGroup() != null ? fresh.cpuGroup() : shrinkGroups.get(rank), null));
                                } finally {
                                    fresh.comm().close();
                                }
                            }
                            results.set(rank, res);
                        } finally {
                            setup.comm().close();
                        }
                    } catch (Throwable e) {
                        Map<String, String> m = new LinkedHashMap<>();
                        m.put("<setup>", String.valueOf(e));
                        results.set(rank, m);
                        log.println("rank " + rank + " of world " + worldSize + " failed: " + e);
                        e.printStackTrace(log);
                        groups.get(rank).poison(new io.jcomm.api.CommClosedException("rank " + rank + " failed"));
                        shrinkGroups.get(rank).poison(new io.jcomm.api.CommClosedException("rank " + rank + " failed"));
                    }
                }, "conformance-w" + worldSize + "-r" + r);
                t.setDaemon(true);
                threads.add(t);
                t.start();
            }
            long deadline = System.nanoTime() + timeout().multipliedBy(4).toNanos();
            for (Thread t : threads) {
                try {
                    t.join(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                if (t.isAlive()) {
                    StringBuilder trace = new StringBuilder();
                    for (StackTraceElement el : t.getStackTrace()) {
                        trace.append("\n    at ").append(el);
                    }
                    throw new AssertionError(t.getName() + " did not finish within " + timeout().multipliedBy(4) + trace);
                }
            }
        } catch (Exception e) {
            throw new AssertionError("world of " + worldSize + " failed to close", e);
        }
        List<Map<String, String>> out = new ArrayList<>();
        for (int r = 0; r < worldSize; r++) {
            out.add(results.get(r) == null ? Map.of() : results.get(r));
        }
        return out;
    }
}
