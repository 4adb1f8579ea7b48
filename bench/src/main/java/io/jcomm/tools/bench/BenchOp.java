package io.jcomm.tools.bench;

import java.util.Locale;

/**
 * The benchmarked operations, with nccl-tests' bus-bandwidth factors: busbw = algbw x factor, where
 * algbw = size / time and size is the op's total buffer (the gathered output of an all-gather, the
 * input of a reduce-scatter). {@link #BROADCAST_TENSOR_DICT} is a metadata-only tensor dict (plain
 * values of about the size): {@code broadcastTensorDict} with {@code --api coordinator}, the same dict
 * through {@code broadcastObject} on a process group.
 */
public enum BenchOp {
    BARRIER(true, false),
    BROADCAST(false, false),
    ALLREDUCE(false, false),
    ALLGATHER(false, false),
    REDUCESCATTER(false, false),
    GATHER(false, false),
    SCATTER(false, false),
    SENDRECV(false, false),
    ALLTOALL(false, false),
    ALLTOALLV(false, false),
    BROADCAST_OBJECT(true, true),
    ALLGATHER_OBJECT(true, true),
    BROADCAST_TENSOR_DICT(true, true);

    private final boolean latency;
    private final boolean object;

    BenchOp(boolean latency, boolean object) {
        this.latency = latency;
        this.object = object;
    }

    /** Latency operations report percentiles rather than bandwidth. */
    public boolean latency() {
        return latency;
    }

    public boolean object() {
        return object;
    }

    public String cliName() {
        return name().toLowerCase(Locale.ROOT).replace('_', '-');
    }

    public static BenchOp parse(String s) {
        return valueOf(s.trim().toUpperCase(Locale.ROOT).replace('-', '_'));
    }

    /** nccl-tests' bus bandwidth factor for {@code n} ranks. */
    public double busFactor(int n) {
        switch (this) {
            case ALLREDUCE: return 2.0 * (n - 1) / n;
            case ALLGATHER: case REDUCESCATTER: case GATHER: case SCATTER: case ALLTOALL: case ALLTOALLV:
                return (double) (n - 1) / n;
            default: return 1.0;
        }
    }
}
