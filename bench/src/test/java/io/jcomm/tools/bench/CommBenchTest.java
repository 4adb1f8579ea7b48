package io.jcomm.tools.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.tools.bench.plot.BenchRun;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class CommBenchTest {

    @Test
    void sizesAndBusFactors() {
        assertEquals(1024, Sizes.parse("1K"));
        assertEquals(64L << 20, Sizes.parse("64M"));
        assertEquals(8, Sizes.parse("8"));
        assertEquals(List.of(1024L, 4096L, 16384L), Sizes.series(1024, 16384, 4));
        assertThrows(IllegalArgumentException.class, () -> Sizes.parse("lots"));
        assertEquals(1.5, BenchOp.ALLREDUCE.busFactor(4));
        assertEquals(0.5, BenchOp.ALLGATHER.busFactor(2));
        assertEquals(1.0, BenchOp.BROADCAST.busFactor(8));
        assertEquals(BenchOp.BROADCAST_OBJECT, BenchOp.parse("broadcast-object"));
        BenchResult r = new BenchResult(4096, 1024, "f32", 12.5, 0.3, 0.3, 12, 20, 30, 20, 7.5);
        assertEquals(r, BenchResult.parse(r.toLine()));
    }

    @Test
    void everyBenchmarkIsASubcommand() {
        var subs = CommBench.commandLine().getSubcommands().keySet();
        for (String name : List.of("allreduce", "barrier", "broadcast-object", "store", "mq", "init", "scale", "plot", "compare")) {
            assertTrue(subs.contains(name), name + " missing from " + subs);
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void runsTwoRanksEndToEnd(@TempDir Path dir) throws Exception {
        Path json = dir.resolve("out.json");
        int code = CommBench.commandLine().execute("allreduce", "--nproc", "2", "-b", "1K", "-e", "64K", "-f", "8",
                "-w", "2", "-n", "5", "--json", json.toString());
        assertEquals(0, code);
        String j = Files.readString(json);
        assertTrue(j.contains("\"op\": \"allreduce\"") && j.contains("\"size\": 1024") && j.contains("\"size\": 65536"), j);
        assertEquals(3, j.split("\"busbw_gbps\"").length - 1, j);
        Path lat = dir.resolve("lat.json");
        assertEquals(0, CommBench.commandLine().execute("broadcast-object", "--nproc", "2", "-w", "10", "-n", "50",
                "--json", lat.toString()));
        assertTrue(Files.readString(lat).contains("\"p99_us\""));
    }

    /** A latency table's row: size, count, dtype, then p50, p99 and p99.9 as numbers. */
    private static final Pattern LATENCY_ROW = Pattern.compile("(?m)^\\s+\\d+\\s+\\d+\\s+\\S+\\s+(\\d+\\.\\d)\\s+(\\d+\\.\\d)\\s+"
            + "(\\d+\\.\\d)\\s+\\d+\\s+\\d+\\.\\d$");
    /** A bandwidth table's row: size, count, dtype, time, algbw, busbw, cpu. */
    private static final Pattern BANDWIDTH_ROW = Pattern.compile("(?m)^\\s+(\\d+)\\s+\\d+\\s+\\S+\\s+(\\d+\\.\\d)\\s+"
            + "\\d+\\.\\d{3}\\s+\\d+\\.\\d{3}\\s+\\d+\\.\\d$");
    private static final Pattern FLOOR = Pattern.compile("(?m)^# shm ping-pong floor \\(one way\\): p50 (\\d+\\.\\d+) us "
            + "p99 (\\d+\\.\\d+) us");

    /** Runs commbench in this JVM and returns its exit code and what it printed on stdout (also echoed). */
    private static Object[] runCapturing(String... args) {
        PrintStream original = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream tee = new PrintStream(new OutputStream() {
            @Override
            public void write(int b) {
                captured.write(b);
                original.write(b);
            }

            @Override
            public void write(byte[] b, int off, int len) {
                captured.write(b, off, len);
                original.write(b, off, len);
            }
        }, true, StandardCharsets.UTF_8);
        System.setOut(tee);
        try {
            int code = CommBench.commandLine().execute(args);
            tee.flush();
            return new Object[] {code, captured.toString(StandardCharsets.UTF_8)};
        } finally {
            System.setOut(original);
        }
    }

    private static long count(Pattern p, String text) {
        return p.matcher(text).results().count();
    }

    private static void assertFloorLines(String out, int expected) {
        Matcher m = FLOOR.matcher(out);
        int n = 0;
        while (m.find()) {
            n++;
            assertTrue(Double.parseDouble(m.group(1)) > 0 && Double.parseDouble(m.group(2)) >= Double.parseDouble(m.group(1)),
                    m.group());
        }
        assertEquals(expected, n, out);
    }

    /** No ping-pong file of a dead process is left in /dev/shm (live ones may be another run's). */
    private static void assertNoFloorFiles() throws Exception {
        try (Stream<Path> files = Files.list(ShmFiles.DEFAULT_DIR)) {
            List<Path> left = files.filter(p -> p.getFileName().toString().startsWith(ShmFloor.PREFIX)
                    && !ShmFiles.ownerAlive(p)).toList();
            assertTrue(left.isEmpty(), "floor files left behind: " + left);
        }
    }

    @Test
    void apisParseAndCoordinatorRefusesWhatItLacks() {
        assertEquals(BenchApi.COORDINATOR, BenchApi.parse(" coordinator"));
        assertEquals(BenchApi.PROCESS_GROUP, BenchApi.parse("process-group"));
        assertThrows(IllegalArgumentException.class, () -> BenchApi.parse("torch"));
        assertTrue(BenchApi.COORDINATOR.supports(BenchOp.BROADCAST_TENSOR_DICT));
        assertFalse(BenchApi.COORDINATOR.supports(BenchOp.ALLTOALL));
        // refused before any worker starts
        assertEquals(2, CommBench.commandLine().execute("alltoall", "--api", "process-group,coordinator"));
        assertEquals(2, CommBench.commandLine().execute("barrier", "--api", "torch"));
        ShmFloor.Result f = new ShmFloor.Result(0.21, 0.35, 1000, null);
        assertEquals(f, ShmFloor.Result.parse(f.toLine()));
        ShmFloor.Result none = ShmFloor.Result.parse(ShmFloor.Result.none("one rank").toLine());
        assertFalse(none.measured());
        assertTrue(none.describe().contains("not measured (one rank)"), none.describe());
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void coordinatorBarrierTableHasNumbersRoutesAndTheFloor() throws Exception {
        Object[] r = runCapturing("barrier", "--api", "coordinator", "--nproc", "2", "-w", "50", "-n", "300",
                "--progress-interval", "0");
        String out = (String) r[1];
        assertEquals(0, r[0], out);
        assertTrue(out.contains("api=coordinator") && out.contains("barrier via the CPU group"), out);
        assertEquals(1, count(LATENCY_ROW, out), out);
        assertFloorLines(out, 1);
        assertNoFloorFiles();
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void coordinatorAllReduceTableHasARowPerSize() throws Exception {
        Object[] r = runCapturing("allreduce", "--api", "coordinator", "--nproc", "2", "-b", "1K", "-e", "4K", "-f", "4",
                "-w", "2", "-n", "5", "--progress-interval", "0");
        String out = (String) r[1];
        assertEquals(0, r[0], out);
        Matcher m = BANDWIDTH_ROW.matcher(out);
        int rows = 0;
        while (m.find()) {
            rows++;
            assertTrue(Double.parseDouble(m.group(2)) > 0, m.group());
        }
        assertEquals(2, rows, out);
        assertFloorLines(out, 1);
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void tensorDictMetadataThroughBothApisSideBySide(@TempDir Path dir) throws Exception {
        Path json = dir.resolve("td.json");
        Object[] r = runCapturing("broadcast-tensor-dict", "--api", "process-group,coordinator", "--nproc", "2", "-w", "50",
                "-n", "300", "--progress-interval", "0", "--json", json.toString());
        String out = (String) r[1];
        assertEquals(0, r[0], out);
        assertEquals(2, count(LATENCY_ROW, out), out);
        assertFloorLines(out, 2);
        assertTrue(out.contains("tensor-dict metadata from rank 0 via the shm message queue"), out);
        assertTrue(out.contains("# side by side: p50 (us)") && out.contains("tcp/process-group")
                && out.contains("tcp/coordinator"), out);
        String j = Files.readString(json);
        assertTrue(j.contains("\"api\": \"coordinator\"") && j.contains("\"api\": \"process-group\"")
                && j.contains("\"shm_floor_p50_us\""), j);
        assertEquals(List.of("tcp", "tcp/coordinator"), BenchRun.parse(j, "t").stream().map(BenchRun::backend).toList());
    }
}
