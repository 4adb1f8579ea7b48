package io.jcomm.it.device;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.jcomm.device.testkit.ConformanceRunner;
import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;

/**
 * The device-communicator conformance kit across real JVMs: {@link DeviceConformanceWorker} on every
 * rank, over the real TCP store and CPU group, one job per world size; then one test per case
 * asserting it passed on every rank. Subclasses name the device type and the configured provider.
 */
@Timeout(value = 240)
abstract class AbstractDeviceConformanceIT {

    /** {@code cpu}, {@code fakeaccel}, {@code cuda}. */
    protected abstract String deviceType();

    /** The value of {@code JCOMM_DEVICE_COMM}: a provider name or {@code auto}. */
    protected abstract String configuredProvider();

    /** The provider expected to be chosen. */
    protected abstract String expectedProvider();

    protected int[] worldSizes() {
        return new int[] {2, 4};
    }

    /** Why the run cannot happen here (reported as a skipped test), or {@code null} to run. */
    protected String skipReason() {
        return null;
    }

    /** Checks on rank 0's output beyond the cases (e.g. which jar the provider came from). */
    protected void checkOutput(List<String> rank0) {
    }

    @TestFactory
    Stream<DynamicNode> conformanceAcrossJvms() {
        String skip = skipReason();
        if (skip != null) {
            return Stream.of(DynamicTest.dynamicTest("not run here", () -> Assumptions.abort(skip)));
        }
        List<String> names = ConformanceRunner.caseNames();
        return Arrays.stream(worldSizes()).mapToObj(w -> DynamicContainer.dynamicContainer(w + " JVMs",
                Stream.of(w).flatMap(ws -> {
                    MultiJvm.Results results = runJob(ws);
                    List<Map<String, String>> perRank = new ArrayList<>();
                    for (int r = 0; r < ws; r++) {
                        perRank.add(ConformanceRunner.parse(results.output(r)));
                    }
                    List<DynamicNode> tests = new ArrayList<>();
                    tests.add(DynamicTest.dynamicTest("every rank exited cleanly, provider " + expectedProvider(), () -> {
                        results.assertAllSucceeded();
                        for (int r = 0; r < ws; r++) {
                            assertEquals(1, results.linesContaining(r, "PROVIDER " + expectedProvider() + " ").size(),
                                    String.join("\n", results.output(r)));
                        }
                        checkOutput(results.output(0));
                    }));
                    for (String name : names) {
                        tests.add(DynamicTest.dynamicTest(name, () -> {
                            StringBuilder sb = new StringBuilder();
                            for (int r = 0; r < ws; r++) {
                                Map<String, String> m = perRank.get(r);
                                if (!m.containsKey(name)) {
                                    sb.append("\n  rank ").append(r).append(": no result");
                                } else if (m.get(name) != null) {
                                    sb.append("\n  rank ").append(r).append(": ").append(m.get(name));
                                }
                            }
                            if (sb.length() > 0) {
                                throw new AssertionError("case '" + name + "' failed:" + sb);
                            }
                        }));
                    }
                    return tests.stream();
                })));
    }

    private MultiJvm.Results runJob(int worldSize) {
        try (MultiJvm job = MultiJvm.builder().name(deviceType() + "-" + worldSize).worldSize(worldSize)
                .mainClass(DeviceConformanceWorker.class).args(deviceType())
                .env("JCOMM_DEVICE_COMM", configuredProvider()).env("JCOMM_TIMEOUT_MS", "30000")
                .jvmArg("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")
                .maxHeap("256m").echo(null).deadline(Duration.ofSeconds(150)).start()) {
            return job.awaitAll();
        }
    }
}
