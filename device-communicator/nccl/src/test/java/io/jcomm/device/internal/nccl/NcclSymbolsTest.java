package io.jcomm.device.internal.nccl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Keeps {@link NcclConstants#MIN_VERSION_CODE} in step with the NCCL functions that
 * {@link JavaCppNcclApi} calls: a new call to a function that is not in the table below, or one
 * newer than the floor, fails here rather than killing a user's JVM on an older libnccl.
 */
class NcclSymbolsTest {

    /** The NCCL release that introduced each function (NCCL's release notes). */
    private static final Map<String, Integer> SINCE = Map.ofEntries(
            Map.entry("ncclGetUniqueId", 20000), Map.entry("ncclCommInitRank", 20000),
            Map.entry("ncclCommDestroy", 20000), Map.entry("ncclGetErrorString", 20000),
            Map.entry("ncclAllReduce", 20000), Map.entry("ncclAllGather", 20000),
            Map.entry("ncclBroadcast", 20000), Map.entry("ncclReduceScatter", 20000),
            Map.entry("ncclGroupStart", 20000), Map.entry("ncclGroupEnd", 20000),
            Map.entry("ncclGetVersion", 20300), Map.entry("ncclCommAbort", 20400),
            Map.entry("ncclCommGetAsyncError", 20400), Map.entry("ncclSend", 20700),
            Map.entry("ncclRecv", 20700), Map.entry("ncclGetLastError", 21300),
            Map.entry("ncclCommFinalize", 21400));

    /**
     * Functions called only after a run-time check of the loaded library's version (their release is
     * the constant of that check), so they do not raise the floor.
     */
    private static final Map<String, Integer> GATED = Map.of("ncclCommShrink", NcclConstants.SHRINK_MIN_VERSION_CODE);

    @Test
    void gatedFunctionsAreCheckedAtTheReleaseThatAddedThem() {
        assertEquals("2.27.0", NcclConstants.versionString(NcclConstants.SHRINK_MIN_VERSION_CODE),
                "ncclCommShrink came with NCCL 2.27.0");
    }

    @Test
    void everyNcclFunctionCalledIsKnownAndNoNewerThanTheFloor() throws IOException {
        Path src = Path.of("src/main/java/io/jcomm/device/internal/nccl/JavaCppNcclApi.java");
        String code = Files.readString(src, StandardCharsets.UTF_8);
        Matcher m = Pattern.compile("\\bnccl\\.(nccl[A-Z]\\w*)\\s*\\(").matcher(code);
        TreeSet<String> called = new TreeSet<>();
        while (m.find()) {
            called.add(m.group(1));
        }
        assertTrue(called.size() >= 15, "found the calls: " + called);
        int newest = 0;
        for (String f : called) {
            if (GATED.containsKey(f)) {
                continue;
            }
            Integer since = SINCE.get(f);
            assertTrue(since != null, f + " is called but its NCCL release is not in this table: add it, and raise "
                    + "NcclConstants.MIN_VERSION_CODE if it is newer");
            newest = Math.max(newest, since);
        }
        assertEquals(NcclConstants.versionString(newest), NcclConstants.versionString(NcclConstants.MIN_VERSION_CODE),
                "the floor is the release of the newest function called");
    }
}
