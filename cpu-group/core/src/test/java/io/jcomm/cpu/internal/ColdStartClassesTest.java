package io.jcomm.cpu.internal;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.JvmFlags;
import io.jcomm.testkit.ChildJvm;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What a cold JVM does not do while it sets up a tcp group and runs its first collectives (each is a
 * cost of every rank's start): it reads no annotation (Netty's bootstraps and handler adapters make
 * the pipeline read {@code @Sharable} and {@code @Skip}; the JVM's first annotation parses the
 * annotation types and generates their proxy classes), and, with the SDK's JVM flags, builds no
 * adaptive buffer allocator (Netty 4.2's default, which sets up its magazines for every size class).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ColdStartClassesTest {

    @Test
    void aColdTcpGroupReadsNoAnnotationAndBuildsNoAdaptiveAllocator() throws Exception {
        List<String> args = new ArrayList<>(JvmFlags.REQUIRED);
        args.add("-Xlog:jfr*=off");
        String out = ChildJvm.classLoads(OperationEventTest.Child.class, args);
        assertTrue(out.contains("child: done"), out);
        // the check sees what it looks for: the group's Netty channels were made
        assertTrue(out.contains("io.netty.channel.DefaultChannelPipeline "), "no Netty pipeline in the child:\n" + out);
        assertFalse(out.contains("sun.reflect.annotation.AnnotationType "), "an annotation was read:\n" + lines(out, "annotation"));
        assertFalse(out.contains("$Proxy"), "a proxy class was made:\n" + lines(out, "$Proxy"));
        assertTrue(out.contains("io.netty.buffer.PooledByteBufAllocator "), "no pooled allocator with the SDK's flags");
        assertFalse(out.contains("io.netty.buffer.AdaptivePoolingAllocator "), "the adaptive allocator was built");
    }

    private static String lines(String out, String what) {
        StringBuilder b = new StringBuilder();
        for (String l : out.split("\n")) {
            if (l.contains(what)) {
                b.append(l).append('\n');
            }
        }
        return b.toString();
    }
}
