package io.jcomm.transfer.internal.shm;

import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.transfer.MemoryKind;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import io.jcomm.transfer.internal.ShmRegionFile;
import io.jcomm.transfer.spi.PeerInfo;
import io.jcomm.transfer.spi.Segment;
import io.jcomm.transfer.spi.Transport;
import io.jcomm.transfer.spi.TransportContext;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Same-host transfers into and out of a peer's {@link MemoryKind#SHARED} regions: the peer's region
 * file is mapped once (looked up in the directory the peer published, checked against its header)
 * and every transfer is one copy in the calling thread, bracketed by the header's in-flight counter
 * and checked against the header's generation, permissions and length (see {@link ShmRegionFile}).
 * Notifications go through another transport (tcp), after the copy.
 *
 * <p>The owner's checks here run in the initiator's process, on the header the owner keeps: they
 * guard against stale and out-of-range descriptors of a well-meaning peer; a hostile process of the
 * same user could map the file itself (the file is {@code 0600}).
 */
final class ShmTransport implements Transport {

    private static final OpContext CONTEXT = OpContext.of("transfer", -1, "shm");
    private static final int MAX_MAPPINGS = 4096;

    private final TransportContext ctx;
    private final Path base;
    private final byte[] endpoint;
    /** Mapped peer regions by agent, region id and generation. */
    private final Map<String, Mapping> mappings = new ConcurrentHashMap<>();

    private record Mapping(ShmRegionFile file) {
    }

    ShmTransport(TransportContext ctx) {
        this.ctx = ctx;
        this.base = ctx.options().shmDirectory();
        this.endpoint = ctx.sharedRegionDirectory().toString().getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public String name() {
        return ShmTransportProvider.NAME;
    }

    @Override
    public byte[] endpoint() {
        return endpoint.clone();
    }

    @Override
    public boolean reaches(PeerInfo peer, RemoteDescriptor remote) {
        if (remote.kind() != MemoryKind.SHARED || !peer.hostId().equals(ctx.options().hostId())) {
            return false;
        }
        return mapping(peer, remote) != null;
    }

    private ShmRegionFile mapping(PeerInfo peer, RemoteDescriptor remote) {
        String key = remote.agent() + "/" + remote.regionId() + "/" + remote.generation();
        Mapping m = mappings.get(key);
        if (m != null) {
            return m.file();
        }
        byte[] dir = peer.endpoints().get(ShmTransportProvider.NAME);
        ShmRegionFile f = null;
        if (dir != null && mappings.size() < MAX_MAPPINGS) {
            Path d = ShmFiles.offered(base, new String(dir, StandardCharsets.UTF_8), ShmRegionFile.DIR_PREFIX);
            if (d != null) {
                try {
                    f = ShmRegionFile.attach(d.resolve(ShmRegionFile.fileName(remote.regionId(), remote.generation())),
                            remote.regionId());
                } catch (IOException | RuntimeException e) {
                    f = null; // not visible here (another container, deregistered): tcp carries it
                }
            }
        }
        if (f != null) {
            mappings.put(key, new Mapping(f));
        }
        return f;
    }

    @Override
    public boolean carriesNotifications() {
        return false;
    }

    @Override
    public CompletableFuture<Void> write(PeerInfo peer, List<Segment> segments, byte[] notification, Deadline deadline) {
        return copy(peer, segments, true);
    }

    @Override
    public CompletableFuture<Void> read(PeerInfo peer, List<Segment> segments, Deadline deadline) {
        return copy(peer, segments, false);
    }

    private CompletableFuture<Void> copy(PeerInfo peer, List<Segment> segments, boolean write) {
        try {
            for (Segment s : segments) {
                RemoteDescriptor r = s.remote();
                ShmRegionFile f = mapping(peer, r);
                if (f == null) {
                    throw new io.jcomm.api.PeerFailureException(CONTEXT, -1, "shared region " + r.regionId() + " of agent "
                            + r.agent() + " is no longer mappable");
                }
                ByteBuffer remote = f.begin(r.generation(), r.offset(), r.length(), write ? Permission.WRITE : Permission.READ,
                        r.agent());
                try {
                    if (write) {
                        remote.put(s.local().duplicate());
                    } else {
                        s.local().duplicate().put(remote);
                    }
                } finally {
                    f.end();
                }
            }
            return CompletableFuture.completedFuture(null);
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public void forget(String agent) {
        mappings.keySet().removeIf(k -> k.startsWith(agent + "/"));
    }

    @Override
    public void close() {
        mappings.clear();
    }
}
