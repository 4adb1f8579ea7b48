package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.Availability;
import io.jcomm.cpu.spi.CpuBackend;
import io.jcomm.cpu.spi.CpuBackendContext;
import io.jcomm.cpu.spi.CpuBackendProvider;
import io.netty.channel.epoll.Epoll;

/**
 * The {@code tcp} CPU backend: pure Java over Netty (epoll when available, else NIO), with a
 * shared-memory data path between processes on one host. Always available. Options: see
 * {@link io.jcomm.cpu.TcpOptions} ({@code tcp.*}).
 */
public final class TcpBackendProvider implements CpuBackendProvider {

    /** The backend's name. */
    public static final String NAME = "tcp";
    /** Priority for automatic choice. */
    public static final int PRIORITY = 50;

    private volatile Availability availability;

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public java.util.Optional<java.util.Set<String>> optionKeys() {
        return java.util.Optional.of(io.jcomm.cpu.TcpOptions.KEYS);
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    @Override
    public Availability availability() {
        Availability a = availability;
        if (a == null) {
            boolean epoll;
            try {
                epoll = Epoll.isAvailable();
            } catch (Throwable t) { // a broken native library must not break the provider
                epoll = false;
            }
            a = Availability.available("pure Java over Netty (" + (epoll ? "epoll" : "NIO") + "), shared memory for same-host peers");
            availability = a;
        }
        return a;
    }

    @Override
    public CpuBackend create(CpuBackendContext context) {
        TcpBackend b = new TcpBackend(Engine.connect(context, new TcpConfig(context)));
        try {
            b.setUpFastPath(io.jcomm.api.Deadline.after(context.timeout()));
        } catch (RuntimeException e) {
            b.close();
            throw e;
        }
        return b;
    }
}
