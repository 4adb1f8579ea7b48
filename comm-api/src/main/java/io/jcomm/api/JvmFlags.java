package io.jcomm.api;

import java.util.List;

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

    private JvmFlags() {
    }
}
