package io.jcomm.parallel;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import io.jcomm.runtime.Entropy;
import io.jcomm.api.store.Store;
import io.jcomm.parallel.internal.JobKeys;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The one exchange every rank makes before any group exists: its host id, through the store (three
 * round trips: count this incarnation, publish, read all). Rank 0 adds a random job nonce that
 * names the job's shared-memory files. Doing it through the store rather than over the world group
 * lets every group, the world included, be created at once, each already knowing which members
 * share a host.
 */
final class HostExchange {

    /** What the exchange gives every rank; {@code incarnation} counts this rank's states on the store ({@link JobKeys}). */
    record Result(HostTopology topology, long nonce, long incarnation) {
    }

    private HostExchange() {
    }

    static Result run(DistributedConfig config, Store jobStore, Duration timeout) {
        int n = config.worldSize();
        int rank = config.rank();
        long mine = rank == 0 ? Entropy.nextLong() : 0L;
        if (n == 1) {
            return new Result(HostTopology.of(List.of(config.hostId())), mine, 0);
        }
        // each rank counts its own incarnations; all ranks of a job count alike, so keys of an
        // earlier state on the same store are never read
        long incarnation = jobStore.add(JobKeys.incarnationCounter(rank), 1);
        jobStore.set(JobKeys.hostInfo(incarnation, rank), (config.hostId() + "\n" + Long.toHexString(mine))
                .getBytes(StandardCharsets.UTF_8));
        List<String> keys = new ArrayList<>(n);
        for (int r = 0; r < n; r++) {
            keys.add(JobKeys.hostInfo(incarnation, r));
        }
        List<byte[]> values = jobStore.multiGet(keys, timeout);
        List<String> hosts = new ArrayList<>(n);
        long nonce = 0;
        OpContext ctx = OpContext.of(ParallelState.WORLD, rank, "hostExchange");
        for (int r = 0; r < n; r++) {
            byte[] v = values.get(r);
            if (v == null || v.length > JobKeys.MAX_HOST_ID_BYTES + 20) {
                throw new ProtocolException(ctx, "host info of rank " + r + " is missing or too long");
            }
            String s = new String(v, StandardCharsets.UTF_8);
            int nl = s.lastIndexOf('\n');
            if (nl <= 0) {
                throw new ProtocolException(ctx, "malformed host info of rank " + r);
            }
            hosts.add(s.substring(0, nl));
            if (r == 0) {
                try {
                    nonce = Long.parseUnsignedLong(s.substring(nl + 1), 16);
                } catch (NumberFormatException e) {
                    throw new ProtocolException(ctx, "malformed job nonce from rank 0");
                }
            }
        }
        return new Result(HostTopology.of(hosts), nonce, incarnation);
    }
}
