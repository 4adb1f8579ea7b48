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
        return java.util.Optional.of(java.util.Set.of(GlooBackend.DEVICES_OPTION, GlooBackend.IFNAME_OPTION,
                GlooBackend.HOSTNAME_OPTION, GlooBackend.GOODBYE_OPTION, GlooBackend.TORCH_HALF_OPTION,
                GlooBackend.CHECK_ARGS_OPTION, GlooBackend.LOOP_NICE_OPTION));
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
