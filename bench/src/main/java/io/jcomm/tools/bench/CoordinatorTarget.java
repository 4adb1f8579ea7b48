package io.jcomm.tools.bench;

import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.Store;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;

/**
 * The {@code --api coordinator} side of a {@code commbench} rank: the operations go through the TP
 * group of a {@link ParallelState} with TP = world size (every rank in it, as vLLM's TP group), built
 * with the SDK's defaults on host tensors, so that the coordinator's own routes are what is measured:
 * the node-local channel (barrier), the shared-memory message queue (object and tensor-dict metadata
 * broadcasts from group rank 0, the queue's writer), and the CPU group for the rest (tensor
 * collectives, send/recv, all-gather of objects). Its CPU group carries the run's bookkeeping.
 */
final class CoordinatorTarget implements BenchWorker.Target {

    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    private final GroupCoordinator c;

    CoordinatorTarget(GroupCoordinator c) {
        this.c = c;
    }

    /**
     * The job's groups on {@code store} (which the caller keeps): TP = world, CPU backend
     * {@code backend} with {@code options}, the CPU device communicator; waits for the TP broadcaster.
     */
    static ParallelState initialize(DistributedConfig cfg, Store store, String backend, Map<String, String> options) {
        ParallelStateOptions.Builder b = ParallelStateOptions.builder().device(Device.CPU).deviceCommunicator("cpu")
                .cpuBackend(backend).timeout(TIMEOUT);
        options.forEach(b::cpuOption);
        ParallelState ps = ParallelState.initialize(cfg, store, b.build(), ParallelSizes.of(cfg.worldSize(), 1, 1));
        try {
            GroupCoordinator tp = ps.tp();
            // made in the background: the first broadcast after this switches every rank to it; without
            // it broadcasts stay on the node-local channel, which the routes line then says (the reason
            // is LateBroadcaster's log line, which the launcher turns on)
            if (tp.hasBroadcaster() && tp.awaitMessageQueue(TIMEOUT).isEmpty()) {
                System.err.println("commbench: rank " + cfg.rank() + ": no message queue for " + tp.name()
                        + " (failed or not ready in " + TIMEOUT.toSeconds() + " s); its broadcasts are measured without it");
            }
            return ps;
        } catch (RuntimeException e) {
            ps.close();
            throw e;
        }
    }

    @Override
    public ProcessGroup control() {
        return c.cpuGroup();
    }

    @Override
    public void warmUpRound(Tensor x) {
        c.barrier();
        c.allReduce(x, ReduceOp.SUM);
        c.broadcastObject(c.rankInGroup() == 0 ? "warm" : null, 0, String.class);
    }

    @Override
    public String routes() {
        String objects = c.broadcastsThroughQueue() ? "the shm message queue" : "the CPU group (no message queue)";
        return "api=coordinator: group " + c.name() + " (" + c.worldSize() + " ranks"
                + (c.isNodeLocal() ? ", one host" : "") + "); barrier via the CPU group; broadcastObject and "
                + "tensor-dict metadata from rank 0 via " + objects + "; tensors, allGatherObject and send/recv via the "
                + c.cpuGroup().backendName() + " CPU group";
    }

    @Override
    public Runnable prepare(BenchOp op, DType t, long size) {
        int n = c.worldSize();
        int rank = c.rankInGroup();
        switch (op) {
            case BARRIER:
                return c::barrier;
            case BROADCAST: {
                Tensor x = Tensor.allocate(t, BenchWorker.count(size, t, n, false));
                return x.numel() == 0 ? null : () -> c.broadcast(x, 0);
            }
            case ALLREDUCE: {
                Tensor x = Tensor.allocate(t, BenchWorker.count(size, t, n, false));
                x.fill(1);
                return x.numel() == 0 ? null : () -> c.allReduce(x, ReduceOp.SUM);
            }
            case ALLGATHER: {
                long count = BenchWorker.count(size, t, n, true);
                Tensor out = Tensor.allocate(t, count);
                Tensor in = Tensor.allocate(t, count / n);
                return count == 0 ? null : () -> c.allGather(out, in, 0);
            }
            case REDUCESCATTER: {
                long count = BenchWorker.count(size, t, n, true);
                Tensor in = Tensor.allocate(t, count);
                Tensor out = Tensor.allocate(t, count / n);
                return count == 0 ? null : () -> c.reduceScatter(out, in, ReduceOp.SUM, 0);
            }
            case GATHER: {
                // the coordinator's gather allocates the result on the destination, as vLLM's does
                long count = BenchWorker.count(size, t, n, true);
                Tensor in = Tensor.allocate(t, count / n);
                return count == 0 ? null : () -> c.gather(in, 0, 0);
            }
            case SENDRECV: {
                // ring exchange as with the process group: even ranks send first, odd ranks receive first
                long count = BenchWorker.count(size, t, n, false);
                Tensor out = Tensor.allocate(t, count);
                Tensor in = Tensor.allocate(t, count);
                int next = c.nextInGroup();
                int prev = c.prevInGroup();
                if (count == 0) {
                    return null;
                }
                return rank % 2 == 0 ? () -> {
                    c.send(out, next);
                    c.recv(in, prev);
                } : () -> {
                    c.recv(in, prev);
                    c.send(out, next);
                };
            }
            case BROADCAST_OBJECT: {
                byte[] payload = new byte[(int) Math.max(1, size - 8)];
                Arrays.fill(payload, (byte) 7);
                return () -> c.broadcastObject(rank == 0 ? payload : null, 0, byte[].class);
            }
            case ALLGATHER_OBJECT: {
                byte[] payload = new byte[(int) Math.max(1, size - 8)];
                return () -> c.allGatherObject(payload, byte[].class);
            }
            case BROADCAST_TENSOR_DICT: {
                Map<String, Object> dict = BenchWorker.metadataDict(size);
                return () -> c.broadcastTensorDict(rank == 0 ? dict : null, 0);
            }
            default:
                throw new IllegalArgumentException(op.cliName() + " has no GroupCoordinator counterpart");
        }
    }
}
