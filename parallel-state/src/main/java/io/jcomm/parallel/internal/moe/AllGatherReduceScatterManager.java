package io.jcomm.parallel.internal.moe;

import io.jcomm.api.DType;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.All2AllManager;
import io.jcomm.parallel.All2AllManagers;
import io.jcomm.parallel.DispatchResult;
import io.jcomm.parallel.ExpertRouting;
import io.jcomm.parallel.GroupCoordinator;
import java.util.Arrays;

/**
 * vLLM's default scheme ({@code allgather_reducescatter}): dispatch all-gathers every member's
 * tokens and routing over the CPU group, so every rank sees every token and keeps the copies
 * routed to its experts; combine writes each token's weighted sum of this rank's expert outputs
 * into a zero buffer of all tokens and reduce-scatters it (sum), so each rank gets its own tokens'
 * results. Token counts may differ: every member's count is all-gathered first and the tokens are
 * padded to the largest (3 collectives in dispatch, 1 in combine; none when no rank has tokens).
 */
public final class AllGatherReduceScatterManager implements All2AllManager {

    @Override
    public String name() {
        return All2AllManagers.ALLGATHER_REDUCESCATTER;
    }

    @Override
    public DispatchResult dispatch(GroupCoordinator group, Tensor hidden, ExpertRouting routing) {
        int n = group.worldSize();
        int me = group.rankInGroup();
        int h = MoeRows.hiddenSize(hidden, routing, n);
        DType dtype = hidden.dtype();
        int k = routing.topK();
        int tokens = routing.numTokens();
        ProcessGroup pg = group.cpuGroup();

        long[] mine = MoeRows.meta(tokens, h, dtype, routing);
        Tensor meta = gather(pg, n, Tensor.ofLongs(mine), DType.I64, MoeRows.META);
        MoeRows.requireSame(group, "dispatch", mine, meta);
        int[] counts = new int[n];
        int max = 0;
        for (int r = 0; r < n; r++) {
            counts[r] = Math.toIntExact(meta.getLong((long) r * MoeRows.META));
            max = Math.max(max, counts[r]);
        }
        if (max == 0) {
            return new Result(group.name(), Tensor.allocate(dtype, 0, h), new int[0], new int[0], new float[0], 0, tokens);
        }

        // this rank's tokens and routing, padded to the largest count; routing as (id, weight) pairs in F64 (both exact)
        Tensor padded = Tensor.allocate(dtype, max, h);
        padded.buffer().put(hidden.buffer());
        Tensor route = Tensor.allocate(DType.F64, (long) max * k * 2);
        for (int t = 0; t < tokens; t++) {
            for (int j = 0; j < k; j++) {
                long at = ((long) t * k + j) * 2;
                route.setDouble(at, routing.expert(t, j));
                route.setDouble(at + 1, routing.weight(t, j));
            }
        }
        Tensor all = n == 1 ? padded : Tensor.allocate(dtype, (long) n * max, h);
        Tensor allRoute = gather(pg, n, route, DType.F64, (long) max * k * 2);
        if (n > 1) {
            pg.allGather(all, padded);
        }

        // keep the copies routed here: by source rank, token, slot
        int perRank = routing.expertsPerRank(n);
        int rows = 0;
        int[] slot = new int[n * max * k];
        for (int s = 0; s < n; s++) {
            for (int t = 0; t < counts[s]; t++) {
                for (int j = 0; j < k; j++) {
                    int copy = (s * max + t) * k + j;
                    if ((int) allRoute.getDouble(copy * 2L) / perRank == me) {
                        slot[rows++] = copy;
                    }
                }
            }
        }
        Tensor out = Tensor.allocate(dtype, rows, h);
        int[] expertIds = new int[rows];
        int[] token = new int[rows];
        float[] weights = new float[rows];
        int rowBytes = h * dtype.byteSize();
        for (int i = 0; i < rows; i++) {
            int copy = slot[i];
            token[i] = copy / k;
            expertIds[i] = (int) allRoute.getDouble(copy * 2L);
            weights[i] = (float) allRoute.getDouble(copy * 2L + 1);
            MoeRows.copyRow(out, i, all, token[i], rowBytes);
        }
        return new Result(group.name(), out, expertIds, token, weights, max, tokens);
    }

    @Override
    public Tensor combine(GroupCoordinator group, DispatchResult dispatched, Tensor expertOutput) {
        Result r = MoeRows.own(Result.class, name(), group, dispatched);
        MoeRows.requireOutputFor(r, expertOutput);
        int n = group.worldSize();
        int h = Math.toIntExact(r.tokens.size(1));
        DType dtype = r.tokens.dtype();
        if (r.max == 0) {
            return Tensor.allocate(dtype, 0, h);
        }
        // each gathered token's sum over the experts of this rank (its rows are adjacent), zero elsewhere
        Tensor all = Tensor.allocate(dtype, (long) n * r.max, h);
        double[] acc = new double[h];
        for (int i = 0; i < r.token.length; i++) {
            MoeRows.addRow(acc, expertOutput, i, r.weights[i]);
            if (i + 1 == r.token.length || r.token[i + 1] != r.token[i]) {
                MoeRows.putRow(all, r.token[i], acc);
                Arrays.fill(acc, 0);
            }
        }
        Tensor mine = all;
        if (n > 1) {
            mine = Tensor.allocate(dtype, r.max, h);
            group.cpuGroup().reduceScatter(mine, all, ReduceOp.SUM);
        }
        return mine.slice0(0, r.localTokens);
    }

    /** All-gathers {@code count} elements of {@code dtype} from every member ({@code in} itself for one member). */
    private static Tensor gather(ProcessGroup pg, int n, Tensor in, DType dtype, long count) {
        if (n == 1) {
            return in;
        }
        Tensor out = Tensor.allocate(dtype, n * count);
        pg.allGather(out, in);
        return out;
    }

    /** Rows to process; for combine: each row's token in the gathered tensor, and its weight. */
    private static final class Result extends MoeResult {
        final int[] token;
        final float[] weights;
        final int max;

        Result(String group, Tensor tokens, int[] expertIds, int[] token, float[] weights, int max, int localTokens) {
            super(All2AllManagers.ALLGATHER_REDUCESCATTER, group, tokens, expertIds, localTokens);
            this.token = token;
            this.weights = weights;
            this.max = max;
        }
    }
}
