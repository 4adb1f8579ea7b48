package io.jcomm.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.JvmFlags;
import io.jcomm.testkit.Requirements;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A real Spark {@code local-cluster}, as {@code spark-submit} would run an application: a driver JVM on a stock
 * Spark's jars ({@code spark/spark-home}: Spark 3.5 with its own Netty 4.1) plus the application's jars (the
 * shaded {@code jcomm-spark} jar and its other dependencies); its master and two workers start two executor
 * JVMs with two task slots each. A barrier stage of four tasks runs {@link SparkPipelineDemo}'s TP2 x PP2 step
 * as one jcomm job ({@link JcommSpark#run}), every value checked, two ranks in each executor. The log is
 * {@code target/spark-demo.log}.
 */
@Timeout(value = 300)
class SparkBarrierIT {

    /** What Spark opens on Java 17 (its launcher's module options), for the driver and the executors. */
    private static final List<String> SPARK_FLAGS = List.of("--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
            "--add-opens=java.base/java.io=ALL-UNNAMED", "--add-opens=java.base/java.net=ALL-UNNAMED",
            "--add-opens=java.base/java.util=ALL-UNNAMED", "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
            "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED", "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
            "--add-opens=java.base/sun.security.action=ALL-UNNAMED", "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
            "-Djdk.reflect.useDirectMethodHandle=false");

    @Test
    void aBarrierStageRunsATpPpJobOnTwoExecutors() throws Exception {
        Path home = Path.of(System.getProperty("jcomm.spark.home", "spark-home/target/spark-home"));
        Path jar = Path.of(System.getProperty("jcomm.spark.jar", "target/jcomm-spark.jar"));
        Path runtime = Path.of(System.getProperty("jcomm.spark.runtime", "target/runtime.classpath"));
        Requirements.assume("spark", Files.isDirectory(home.resolve("jars")) && Files.isRegularFile(jar)
                && Files.isRegularFile(runtime), "no stock Spark in " + home + " or no shaded jar " + jar
                + " (mvn verify builds both)");
        // the application's class path: the shaded jar, its other runtime dependencies, the demo
        String app = String.join(File.pathSeparator, jar.toString(), Files.readString(runtime).trim(),
                System.getProperty("jcomm.spark.tests", "target/test-classes"));
        List<String> flags = new ArrayList<>(JvmFlags.REQUIRED);
        flags.addAll(SPARK_FLAGS);
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        cmd.addAll(flags);
        cmd.addAll(List.of("-Xmx512m",
                "-Dspark.driver.host=127.0.0.1", "-Dspark.driver.bindAddress=127.0.0.1", "-Dspark.ui.enabled=false",
                "-Dspark.executor.memory=768m", "-Dspark.executor.extraClassPath=" + app,
                "-Dspark.executor.extraJavaOptions=" + String.join(" ", flags) + " -XX:+UseSerialGC -XX:TieredStopAtLevel=1",
                // a barrier stage waits for enough free slots: the executors are still starting
                "-Dspark.scheduler.barrier.maxConcurrentTasksCheck.interval=1s",
                "-Dspark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures=120",
                "-Dlog4j2.configurationFile=" + Path.of(System.getProperty("jcomm.spark.tests", "target/test-classes"),
                        "log4j2-test.properties"),
                "-cp", home.resolve("jars") + File.separator + "*" + File.pathSeparator + app,
                SparkPipelineDemo.class.getName(), "local-cluster[2,2,1024]", "2", "2", "200"));
        Path log = jar.toAbsolutePath().getParent().resolve("spark-demo.log");
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
        pb.environment().put("SPARK_HOME", home.toAbsolutePath().toString());
        pb.environment().put("SPARK_SCALA_VERSION", "2.13");
        pb.environment().put("SPARK_LOCAL_IP", "127.0.0.1");
        pb.environment().remove("JCOMM_TOKEN_FILE");
        long t0 = System.nanoTime();
        Process p = pb.start();
        try {
            assertTrue(p.waitFor(240, TimeUnit.SECONDS), "the Spark job did not end:\n" + Files.readString(log));
        } finally {
            p.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
        String out = Files.readString(log);
        System.out.printf("spark: the job took %.1f s from the driver's start%n", (System.nanoTime() - t0) / 1e9);
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("jcomm spark demo: TP=2 x PP=2 on 4 barrier tasks, 200 steps"), out);
        Set<String> pids = new HashSet<>();
        Matcher m = Pattern.compile("rank (\\d) \\(tp (\\d), pp (\\d), local \\d of \\d\\): groups ready in [0-9.]+ s, \\d+ values verified, all exact, "
                + "in pid (\\d+)").matcher(out);
        int ranks = 0;
        while (m.find()) {
            int r = Integer.parseInt(m.group(1));
            assertEquals(ranks, r, out);
            assertEquals(r % 2, Integer.parseInt(m.group(2)), out);
            assertEquals(r / 2, Integer.parseInt(m.group(3)), out);
            pids.add(m.group(4));
            ranks++;
        }
        assertEquals(4, ranks, out);
        assertEquals(2, pids.size(), "two executor JVMs, two ranks each:\n" + out);
        assertTrue(!pids.contains(Long.toString(p.pid())), "ranks ran in the driver:\n" + out);
        out.lines().filter(l -> l.startsWith("jcomm spark demo") || l.startsWith("  rank")).forEach(l ->
                System.out.println("spark: " + l));
    }
}
