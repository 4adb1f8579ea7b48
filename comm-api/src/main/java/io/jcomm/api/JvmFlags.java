package io.jcomm.api;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The JVM flags every process of this SDK needs (Aeron/Agrona's access to
 * {@code jdk.internal.misc}, Chronicle Map's runtime compilation, Netty's direct buffers), the
 * switch that keeps Chronicle from sending usage analytics, and the one that keeps Netty from
 * registering its JFR events at its first buffer allocation (some 80 JFR classes and a quarter of
 * a second of a cold JVM's CPU; {@code -Dio.netty.jfr.enabled=true} after these flags brings them
 * back), and Netty's pooled buffer allocator as its default ({@code io.netty.allocator.type}). Netty
 * 4.2's own default, the adaptive allocator, builds its magazines for every size class when the first
 * channel is made and carves its first chunks at the first writes: ~30 ms of a lone cold JVM's CPU,
 * more where JVMs start side by side, while the SDK's frames are small and short-lived, for which the
 * pooled allocator is as fast (a later {@code -Dio.netty.allocator.type=adaptive} brings it back).
 * Launchers ({@code commrun}, the test harness) put these on every worker's command line;
 * the Maven build's surefire/failsafe {@code argLine} carries the same list.
 */
public final class JvmFlags {

    /** Flags for {@code java} command lines, in order. */
    public static final List<String> REQUIRED = List.of(
            "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
            "--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
            "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
            "--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
            "--add-opens", "java.base/java.lang=ALL-UNNAMED",
            "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
            "--add-opens", "java.base/java.nio=ALL-UNNAMED",
            "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
            "-Dchronicle.analytics.disable=true",
            "-Dio.netty.jfr.enabled=false",
            "-Dio.netty.tryReflectionSetAccessible=true",
            "-Dio.netty.allocator.type=pooled");

    /** The environment variable of glibc's tunables, read by {@code malloc} when a process starts. */
    public static final String GLIBC_TUNABLES = "GLIBC_TUNABLES";

    /** The tunable that makes glibc's {@code malloc} ask for transparent huge pages for its large blocks. */
    public static final String MALLOC_HUGE_PAGES = "glibc.malloc.hugetlb";

    private JvmFlags() {
    }

    /**
     * The environment a launcher gives a worker JVM: {@code base} with glibc's {@value #MALLOC_HUGE_PAGES}
     * tunable set to 1 in {@value #GLIBC_TUNABLES} (appended to the tunables already there), unless
     * {@code base} sets that tunable itself ({@code glibc.malloc.hugetlb=0} keeps it off).
     *
     * <p>Why: a host tensor's memory comes from {@code malloc} (a direct buffer). With the tunable,
     * {@code malloc} advises the kernel to back its blocks of 2 MiB and more with transparent huge pages
     * where the kernel's {@code transparent_hugepage} setting is {@code madvise} (Debian's and most
     * distributions' default), so that a tensor of megabytes costs a page fault per 2 MiB instead of per
     * 4 KiB and a kernel copy of it (a same-host all-to-all reads a peer's input with
     * {@code process_vm_readv}) pins 2 MiB pages: a 16 MiB all-to-all of two ranks took 1.4-1.8 ms with it
     * against 1.8-2.6 ms without on the machines measured (docs/PERFORMANCE.md). glibc before 2.35 and other
     * C libraries ignore the variable; a JVM started without a launcher gets it from its own environment.
     *
     * @return a new map; {@code base} is not modified
     */
    public static Map<String, String> workerEnvironment(Map<String, String> base) {
        Map<String, String> env = new LinkedHashMap<>(base);
        String tunables = base.get(GLIBC_TUNABLES);
        if (tunables == null || tunables.isBlank()) {
            env.put(GLIBC_TUNABLES, MALLOC_HUGE_PAGES + "=1");
        } else if (!tunables.contains(MALLOC_HUGE_PAGES + "=")) {
            env.put(GLIBC_TUNABLES, tunables + ":" + MALLOC_HUGE_PAGES + "=1");
        }
        return env;
    }
}
