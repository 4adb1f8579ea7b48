package io.jcomm.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link JvmFlags#workerEnvironment}'s malloc tunable does what its contract says on this machine: a JVM
 * started with it backs a 32 MiB host tensor with transparent huge pages, one started without it does not
 * (where the kernel's setting is {@code madvise}; skipped, with the reason, where it is {@code never} or
 * {@code always}, or where the C library is not glibc 2.35 or later).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MallocHugePagesTest {

    private static final Path THP = Path.of("/sys/kernel/mm/transparent_hugepage/enabled");

    /** The probe: allocates and touches a 32 MiB tensor, prints the process's AnonHugePages in KiB. */
    public static void main(String[] args) throws IOException {
        Tensor t = Tensor.allocate(DType.U8, 32 << 20);
        for (int i = 0; i < t.byteSize(); i += 4096) {
            t.buffer().put(i, (byte) 1);
        }
        long kib = 0;
        for (String line : Files.readAllLines(Path.of("/proc/self/smaps_rollup"), StandardCharsets.US_ASCII)) {
            if (line.startsWith("AnonHugePages:")) {
                kib = Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        System.out.println("HUGE " + kib + " " + t.getLong(0));
    }

    @Test
    void aWorkerJvmBacksLargeTensorsWithHugePagesAndAPlainOneDoesNot() throws Exception {
        Assumptions.assumeTrue(Files.isReadable(THP) && Files.isReadable(Path.of("/proc/self/smaps_rollup")),
                "no transparent huge pages on this system");
        String mode = Files.readString(THP).trim();
        Assumptions.assumeTrue(mode.contains("[madvise]"), "transparent_hugepage is " + mode + ", not madvise");
        Assumptions.assumeTrue(glibcAtLeast(2, 35), "the C library is not glibc 2.35 or later");
        long without = probe(false);
        long with = probe(true);
        assertEquals(0, without, "a JVM without the tunable got huge pages");
        assertTrue(with >= 16 << 10, "a JVM with the tunable backed less than 16 MiB of its 32 MiB tensor with huge "
                + "pages: " + with + " KiB");
    }

    private static long probe(boolean tunable) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(List.of("-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"),
                MallocHugePagesTest.class.getName()));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().remove(JvmFlags.GLIBC_TUNABLES);
        if (tunable) {
            pb.environment().putAll(JvmFlags.workerEnvironment(pb.environment()));
        }
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(30, TimeUnit.SECONDS), "probe did not end");
        assertEquals(0, p.exitValue(), out);
        for (String line : out.split("\n")) {
            if (line.startsWith("HUGE ")) {
                return Long.parseLong(line.split(" ")[1]);
            }
        }
        throw new AssertionError("probe printed no HUGE line: " + out);
    }

    private static boolean glibcAtLeast(int major, int minor) throws Exception {
        Process p = new ProcessBuilder("ldd", "--version").redirectErrorStream(true).start();
        String first = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).split("\n")[0];
        p.waitFor(10, TimeUnit.SECONDS);
        java.util.regex.Matcher m = java.util.regex.Pattern.compile("(GLIBC|GNU libc).* (\\d+)\\.(\\d+)").matcher(first);
        if (!m.find()) {
            return false;
        }
        int a = Integer.parseInt(m.group(2));
        int b = Integer.parseInt(m.group(3));
        return a > major || (a == major && b >= minor);
    }
}
