package io.jcomm.tools.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
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
        for (String name : List.of("allreduce", "barrier", "broadcast-object", "store", "mq", "init", "plot", "compare")) {
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
}
