package io.jcomm.transfer.internal.tcp;

import io.jcomm.api.Availability;
import io.jcomm.transfer.spi.Transport;
import io.jcomm.transfer.spi.TransportContext;
import io.jcomm.transfer.spi.TransportProvider;

/** The {@code tcp} transport: NIO sockets, several streams per peer, every length bounded. */
public final class TcpTransportProvider implements TransportProvider {

    public static final String NAME = "tcp";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public int priority() {
        return 10;
    }

    @Override
    public Availability availability() {
        return Availability.available("NIO sockets");
    }

    @Override
    public Transport open(TransportContext context) {
        return new TcpTransport(context);
    }
}
