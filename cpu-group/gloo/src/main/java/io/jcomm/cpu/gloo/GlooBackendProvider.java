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

    /** Below the pure-Java {@code tcp} backend (50): {@code auto} picks tcp; gloo is chosen by name. */
    public static final int PRIORITY = 20;

    public GlooBackendProvider() {
        // ServiceLoader
    }

    @Override
    public String name() {
        return GlooBackend.NAME;
    }

    @Override
    public java.util.Optional<java.util.Set<String>> optionKeys() {
        return java.util.Optional.of(GlooOptions.KEYS);
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
