package io.jcomm.cpu.gloo;

import io.jcomm.api.Availability;
import io.jcomm.cpu.spi.CpuBackend;
import io.jcomm.cpu.spi.CpuBackendContext;
import io.jcomm.cpu.spi.CpuBackendProvider;

/**
 * Service provider of the {@code gloo} backend ({@link GlooBackend}): available when Debian's
 * libgloo and the JNI glue load in this JVM.
 */
public final class GlooBackendProvider implements CpuBackendProvider {

    /** Preferred over the pure-Java {@code tcp} backend when both are available. */
    public static final int PRIORITY = 20;

    public GlooBackendProvider() {
        // ServiceLoader
    }

    @Override
    public String name() {
        return GlooBackend.NAME;
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    @Override
    public Availability availability() {
        return GlooBackend.availability();
    }

    @Override
    public CpuBackend create(CpuBackendContext context) {
        return GlooBackend.connect(context);
    }
}
