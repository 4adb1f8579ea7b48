package io.jcomm.tools.run;

import io.jcomm.cpu.store.TcpStore;
import java.io.PrintStream;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;

/**
 * How the launchers of an elastic multi-node job ({@code --nnodes MIN:MAX}) learn that a node was lost: each
 * declares itself to the job's store as member {@code <node rank>} of the job {@code <job id>/launchers}, and
 * watches that job's dead members (a launcher whose store connection ended without a goodbye: its host died,
 * or it was killed with its workers). While at least {@code MIN} nodes are left the job goes on (the workers'
 * own recovery, e.g. {@code ParallelState.shrink}, decides what they do without the lost ranks) and the launcher
 * says so once per lost node; below {@code MIN} it stops its own workers. A store that cannot be reached is not a
 * verdict: the workers' own deadlines decide then.
 */
final class NodeWatch implements AutoCloseable {

    /** Suffix of the job id under which the launchers declare themselves. */
    static final String JOB_SUFFIX = "/launchers";
    private static final long POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

    private final RunPlan plan;
    private final String jobId;
    private final PrintStream err;
    private final Runnable stop;
    private final Thread thread;
    private volatile boolean closed;
    private volatile TcpStore store;

    NodeWatch(RunPlan plan, String jobId, PrintStream err, Runnable stop) {
        this.plan = plan;
        this.jobId = jobId;
        this.err = err;
        this.stop = stop;
        this.thread = new Thread(this::run, "commrun-node-watch");
        this.thread.setDaemon(true);
    }

    /** Whether {@code lost} of {@code nnodes} nodes leave fewer than {@code minNodes}. */
    static boolean tooFew(int nnodes, int minNodes, int lost) {
        return nnodes - lost < minNodes;
    }

    NodeWatch start() {
        thread.start();
        return this;
    }

    private void run() {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!closed && store == null) {
            try {
                store = TcpStore.connect(plan.storeClient().member(jobId + JOB_SUFFIX, plan.nodeRank()).build());
            } catch (RuntimeException e) {
                if (System.nanoTime() - end > 0) {
                    err.println("commrun: cannot watch the other nodes through the store (" + e.getMessage() + ")");
                    return;
                }
                sleep(TimeUnit.MILLISECONDS.toNanos(200));
            }
        }
        boolean[] told = new boolean[plan.nnodes()];
        while (!closed) {
            int[] dead;
            try {
                dead = store.deadMembers();
            } catch (RuntimeException e) {
                return; // the store is gone: the workers' deadlines decide
            }
            int lost = 0;
            for (int n : dead) {
                if (n >= 0 && n < told.length && n != plan.nodeRank()) {
                    lost++;
                    if (!told[n]) {
                        told[n] = true;
                        err.println("commrun: node " + n + " was lost (its launcher left the store without a goodbye); "
                                + (plan.nnodes() - lost) + " of " + plan.nnodes() + " nodes left, at least "
                                + plan.minNodes() + " needed (--nnodes " + plan.minNodes() + ":" + plan.nnodes() + ")");
                    }
                }
            }
            if (tooFew(plan.nnodes(), plan.minNodes(), lost)) {
                err.println("commrun: fewer than " + plan.minNodes() + " nodes left (lost " + Arrays.toString(dead)
                        + "); stopping this node's workers");
                stop.run();
                return;
            }
            sleep(POLL_NANOS);
        }
    }

    private static void sleep(long nanos) {
        try {
            TimeUnit.NANOSECONDS.sleep(nanos);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Stops watching and leaves the store with a goodbye (not a loss). */
    @Override
    public void close() {
        closed = true;
        thread.interrupt();
        try {
            thread.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        TcpStore s = store;
        if (s != null) {
            s.close();
        }
    }
}
