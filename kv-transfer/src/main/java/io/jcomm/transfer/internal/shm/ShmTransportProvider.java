package io.jcomm.transfer.internal.shm;

import io.jcomm.api.Availability;
import io.jcomm.transfer.spi.Transport;
import io.jcomm.transfer.spi.TransportContext;
import io.jcomm.transfer.spi.TransportProvider;
import java.nio.file.Files;
import java.nio.file.Path;

/** The {@code shm} transport: same-host copies straight into or out of a peer's shared region file. */
public final class ShmTransportProvider implements TransportProvider {

    public static final String NAME = "shm";

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public int priority() {
        return 100;
    }

    @Override
    public Availability availability() {
        Path dev = Path.of("/dev/shm");
        return Files.isDirectory(dev) && Files.isWritable(dev) ? Availability.available("/dev/shm writable")
                : Availability.unavailable("/dev/shm is not a writable directory (set TransferOptions.shmDirectory)");
    }

    @Override
    public Transport open(TransportContext context) {
        return new ShmTransport(context);
    }
}
