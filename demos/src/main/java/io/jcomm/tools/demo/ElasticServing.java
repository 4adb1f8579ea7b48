package io.jcomm.tools.demo;

import io.jcomm.api.CommException;
import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import io.jcomm.parallel.Recovery;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * {@code demo --elastic}: a serving loop of DP replicas of TP ranks that keeps answering when ranks die
 * ({@code bin/commrun --nproc-per-node 4 --max-lost 2 demo --elastic --tp 2}). Each step every surviving
 * replica answers one request: its TP rank 0 broadcasts the request (a tensor dict) to its TP group,
 * every TP rank computes its shard, the TP all-reduce gives the answer, and every value of it is checked;
 * with {@code --moe} every rank then runs a mixture-of-experts layer over the EP group (a fixed number of
 * experts placed over whatever EP group the last recovery made, every combined value checked); then the
 * replicas agree over DP on how many requests are answered ({@code dpAgree}, which also brings every rank to
 * notice a loss within a step). On a failure every rank still alive calls {@link ParallelState#recover()}:
 * with the default policy the replicas that lost a rank leave (their ranks exit 0 with a line saying so) and
 * the others go on; under {@code commrun --spares K} or {@code --max-restarts N} (policy replace) a spare or the
 * restarted process takes the lost rank's place, and the job goes on with every replica. The survivors agree on
 * the last request all of them completed and go on from there. The lowest rank prints the report: requests
 * answered, values verified, and every recovery with its time.
 *
 * <p>Lines for tests: {@code demo: elastic serving (pid P)} once the groups are ready,
 * {@code demo: elastic joined as rank R in round N (.., pid P)} for a replacement,
 * {@code demo: elastic recovered round R at EPOCH_MS (shrink|replace S ms, ..., lost [..])} when a
 * rank's first collective of a new generation completed, {@code demo: elastic left ...} for a rank whose
 * replica was lost, {@code demo: elastic spare not needed ...} for a spare the job did not use.
 */
final class ElasticServing {

    /** f32 values per request. */
    private final int hidden;
    private final int tp;
    private final int requests;
    private final PrintStream out;

    /** With {@code --moe}: a mixture-of-experts layer over the EP group every step. */
    private final boolean moe;
    /** Experts of the MoE layer: fixed, so that a recovery places them again over the EP group it makes. */
    static final int MOE_EXPERTS = 8;

    ElasticServing(int tp, int hidden, int requests, boolean moe, PrintStream out) {
        this.tp = tp;
        this.moe = moe;
        this.hidden = hidden;
        this.requests = requests;
        this.out = out;
    }

    /** Value {@code i} of request {@code id}'s input on TP rank {@code t}: the answer sums them over TP. */
    static long input(int id, int i, int t) {
        return (t + 1L) * ((id % 89) + (i % 7));
    }

    int run() {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        if (tp < 1 || cfg.worldSize() % tp != 0 || cfg.worldSize() / tp < 2) {
            System.err.println("demo --elastic: the world (" + cfg.worldSize() + ") must hold at least two replicas of "
                    + "--tp " + tp);
            return 2;
        }
        ParallelSizes sizes = ParallelSizes.of(tp, 1, cfg.worldSize() / tp);
        long triangle = (long) tp * (tp + 1) / 2;
        List<String> recoveries = new ArrayList<>();
        long checked = 0;
        long answered = 0; // requests this replica answered (TP rank 0 counts)
        ParallelState state;
        try {
            state = ParallelState.initialize(cfg, ParallelStateOptions.builder()
                    .device(io.jcomm.api.Device.CPU).deviceCommunicator("cpu").build(), sizes);
        } catch (io.jcomm.api.CommClosedException e) {
            if (cfg.role() == DistributedConfig.Role.WORKER) {
                throw e;
            }
            // a spare the job did not need, or a restarted rank whose place another process took
            out.println("demo: elastic " + cfg.role().name().toLowerCase(Locale.ROOT) + " not needed: " + e.getMessage());
            out.flush();
            return 0;
        }
        try (ParallelState ps = state) {
            Tensor shard = Tensor.allocate(DType.F32, hidden);
            long next = 0; // requests done by every replica so far (agreed)
            // after a recovery, the world agrees where to go on, inside the loop: a loss during that all-reduce
            // (a second kill while the job recovers) is one more failure to recover from, not the end
            boolean agree = false;
            boolean recovering = false;
            long failedAt = 0;
            Recovery last = null;
            if (ps.joined().isPresent()) {
                // a restarted or spare process in a lost rank's place: it goes on from where the others are
                last = ps.joined().get();
                out.printf(Locale.ROOT, "demo: elastic joined as rank %d in round %d (%d ms, pid %d)%n", ps.rank(),
                        last.round(), last.took().toMillis(), ProcessHandle.current().pid());
                next = Long.MAX_VALUE; // what the others agree on
                agree = true;
                recovering = true;
                failedAt = System.currentTimeMillis() - last.took().toMillis();
            } else {
                out.println("demo: elastic serving (pid " + ProcessHandle.current().pid() + ")");
            }
            out.flush();
            while (agree || next < requests) {
                try {
                    if (agree) {
                        // the survivors go on from the last step all of them completed (over the world: the TP ranks
                        // of one replica are in different DP groups, and one of them may have finished a step more)
                        Tensor n = Tensor.ofLongs(next);
                        ps.world().cpuGroup().allReduce(n, ReduceOp.MIN);
                        next = n.getLong(0);
                        agree = false;
                        continue;
                    }
                    GroupCoordinator tpg = ps.tp();
                    int replicas = ps.dp().worldSize();
                    int mine = ps.dp().rankInGroup();
                    int id = (int) (next + mine);
                    if (id < requests) {
                        Map<String, Object> req = null;
                        if (tpg.rankInGroup() == 0) {
                            req = new LinkedHashMap<>();
                            req.put("id", (long) id);
                            req.put("tokens", Tensor.ofInts(id, id + 1));
                        }
                        Map<String, Object> got = tpg.broadcastTensorDict(req, 0);
                        int rid = (int) ((Number) got.get("id")).longValue();
                        check(rid, id, "request id", -1);
                        check(((Tensor) got.get("tokens")).getLong(1), id + 1, "request tokens", -1);
                        for (int i = 0; i < hidden; i++) {
                            shard.setDouble(i, input(rid, i, tpg.rankInGroup()));
                        }
                        tpg.allReduce(shard);
                        for (int i = 0; i < hidden; i++) {
                            check((long) shard.getDouble(i), triangle * ((rid % 89) + (i % 7)), "answer", i);
                        }
                        checked += hidden + 2;
                        if (tpg.rankInGroup() == 0) {
                            answered++;
                        }
                    }
                    if (moe) {
                        checked += moeStep(ps.ep(), next);
                    }
                    // how far every replica got: the minimum of what each says, so a step is done everywhere
                    long agreed = ps.dpAgree(new long[] {next + replicas}, ReduceOp.MIN)[0];
                    next = Math.min(agreed, requests);
                    if (recovering) {
                        recovering = false;
                        long now = System.currentTimeMillis();
                        String how = last.replaced().isEmpty() ? "shrink" : "replace";
                        out.printf(Locale.ROOT, "demo: elastic recovered round %d at %d (%s %d ms, detection to "
                                        + "serving %d ms, lost %s)%n", last.round(), now, how, last.took().toMillis(),
                                now - failedAt, last.lostRanks());
                        out.flush();
                        recoveries.add(last.replaced().isEmpty()
                                ? String.format(Locale.ROOT, "round %d: ranks %s lost with replica(s) %s; %d "
                                        + "survivors; shrink %d ms, from the failure to the next request served %d ms",
                                last.round(), last.lostRanks(), last.lostReplicas(), last.survivors().size(),
                                last.took().toMillis(), now - failedAt)
                                : String.format(Locale.ROOT, "round %d: ranks %s lost and replaced; %d ranks; replace "
                                        + "%d ms, from the failure to the next request served %d ms", last.round(),
                                last.lostRanks(), last.survivors().size(), last.took().toMillis(), now - failedAt));
                    }
                } catch (CommException e) {
                    failedAt = System.currentTimeMillis();
                    out.println("demo: elastic failure: " + e);
                    out.flush();
                    last = recover(ps, e);
                    if (last == null) {
                        return 0;
                    }
                    recovering = true;
                    agree = true;
                }
            }
            report(ps, checked, answered, recoveries);
        }
        return 0;
    }

    /** Shrinks (again while a round fails); null when this rank's replica was lost and it left. */
    private Recovery recover(ParallelState ps, CommException cause) {
        CommException lastFailure = cause;
        for (int attempt = 0; attempt < 5; attempt++) {
            try {
                Recovery r = ps.recover();
                if (!r.member()) {
                    out.printf(Locale.ROOT, "demo: elastic left: rank %d's replica lost ranks %s (round %d)%n", ps.rank(),
                            r.lostRanks(), r.round());
                    out.flush();
                    return null;
                }
                return r;
            } catch (io.jcomm.parallel.NoReplicaLeftException | io.jcomm.api.CommTimeoutException e) {
                throw e; // nothing to go on with, or no replacement came
            } catch (CommException e) {
                out.println("demo: elastic recovery failed: " + e);
                out.flush();
                lastFailure = e; // another death during the recovery: the next round
            }
        }
        throw lastFailure;
    }

    /**
     * One MoE layer over the EP group ({@link #MOE_EXPERTS} experts in contiguous blocks over its ranks, however
     * many a recovery left): every token to two experts, expert e computing {@code x * (e + 1)}, every combined
     * value checked. Returns the values checked.
     */
    private static long moeStep(GroupCoordinator ep, long step) {
        if (MOE_EXPERTS % ep.worldSize() != 0) {
            return 0; // an EP group the experts do not divide (a layout the demo does not make)
        }
        int s = (int) (step % 1_000_003);
        int r = ep.rankInGroup();
        int tokens = PipelineDemo.Stage.MOE_TOKENS;
        int width = PipelineDemo.Stage.MOE_HIDDEN;
        Tensor in = Tensor.allocate(DType.F32, tokens, width);
        int[] ids = new int[tokens * 2];
        float[] weights = new float[tokens * 2];
        for (int t = 0; t < tokens; t++) {
            for (int h = 0; h < width; h++) {
                in.setDouble((long) t * width + h, PipelineDemo.Stage.moeInput(s, r, t, h));
            }
            for (int j = 0; j < 2; j++) {
                ids[t * 2 + j] = PipelineDemo.Stage.moeExpert(s, r, t, j, MOE_EXPERTS);
                weights[t * 2 + j] = 0.5f;
            }
        }
        io.jcomm.parallel.DispatchResult d = ep.dispatch(in, io.jcomm.parallel.ExpertRouting.topK(MOE_EXPERTS, 2, ids,
                weights));
        Tensor rows = d.tokens();
        int[] rowExperts = d.expertIds();
        int perRank = MOE_EXPERTS / ep.worldSize();
        Tensor expertOut = Tensor.allocate(DType.F32, d.rows(), width);
        for (int row = 0; row < d.rows(); row++) {
            // this rank holds experts [r * perRank, (r + 1) * perRank) of the current EP group
            check(rowExperts[row] / perRank, r, "expert placement", row);
            for (int h = 0; h < width; h++) {
                long at = (long) row * width + h;
                expertOut.setDouble(at, rows.getDouble(at) * (rowExperts[row] + 1));
            }
        }
        Tensor out = ep.combine(d, expertOut);
        for (int t = 0; t < tokens; t++) {
            for (int h = 0; h < width; h++) {
                long x = PipelineDemo.Stage.moeInput(s, r, t, h);
                long twice = x * (ids[t * 2] + 1) + x * (ids[t * 2 + 1] + 1);
                check((long) (2 * out.getDouble((long) t * width + h)), twice, "moe value x2", t * width + h);
            }
        }
        return (long) tokens * width;
    }

    private void report(ParallelState ps, long checked, long answered, List<String> recoveries) {
        List<long[]> all = ps.world().cpuGroup().allGatherObject(new long[] {checked, answered}, long[].class);
        if (ps.world().rankInGroup() != 0) {
            return;
        }
        long values = 0;
        long served = 0;
        for (long[] a : all) {
            values += a[0];
            served += a[1];
        }
        out.printf(Locale.ROOT, "jcomm elastic serving demo: %d requests over DP replicas of TP=%d, %d rank(s) at the "
                + "end%n", requests, tp, ps.worldSize());
        out.printf(Locale.ROOT, "  requests answered by the survivors: %d (some again after a recovery); verified %d "
                + "values: all exact%n", served, values);
        out.printf(Locale.ROOT, "  recoveries: %d%n", recoveries.size());
        for (String r : recoveries) {
            out.println("    " + r);
        }
        out.flush();
    }

    private static void check(long got, long expected, String what, int index) {
        if (got != expected) {
            throw new IllegalStateException("demo --elastic: " + what + (index >= 0 ? "[" + index + "]" : "") + " = "
                    + got + ", expected " + expected);
        }
    }
}
