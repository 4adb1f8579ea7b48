package io.jcomm.parallel.internal.moe;

import io.jcomm.api.DType;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.All2AllManager;
import io.jcomm.parallel.All2AllManagers;
import io.jcomm.parallel.DispatchResult;
import io.jcomm.parallel.ExpertRouting;
import io.jcomm.parallel.GroupCoordinator;
import java.util.Arrays;

/**
 * Each token copy goes only to the rank of its expert. Dispatch counts the copies per destination
 * rank and exchanges the counts (an {@code allToAll} of a few longs per rank, which also checks
 * that every member agrees on hidden size, dtype, experts and top-k), orders the copies by
 * destination (stable: by token, then slot) and moves them and their expert ids with two
 * {@code allToAllV}s. Combine moves the expert outputs back with the inverse {@code allToAllV}
 * and sums each token's copies with their weights, in slot order. Needs a CPU backend with
 * {@code allToAllV} (tcp, gloo).
 */
public final class AllToAllManager implements All2AllManager {

    @Override
    public String name() {
        return All2AllManagers.ALLTOALL;
    }

    @Override
    public DispatchResult dispatch(GroupCoordinator group, Tensor hidden, ExpertRouting routing) {
        int n = group.worldSize();
        int h = MoeRows.hiddenSize(hidden, routing, n);
        DType dtype = hidden.dtype();
        int k = routing.topK();
        int tokens = routing.numTokens();
        int perRank = routing.expertsPerRank(n);
        ProcessGroup pg = group.cpuGroup();

        // copies per destination, and each copy's place in the send buffer (stable by destination)
        long[] sendCounts = new long[n];
        int copies = tokens * k;
        for (int c = 0; c < copies; c++) {
            sendCounts[routing.expert(c / k, c % k) / perRank]++;
        }
        int[] next = new int[n];
        for (int d = 1; d < n; d++) {
            next[d] = next[d - 1] + (int) sendCounts[d - 1];
        }
        int[] position = new int[copies];
        for (int c = 0; c < copies; c++) {
            position[c] = next[routing.expert(c / k, c % k) / perRank]++;
        }

        // counts (with the layout metadata) to every rank
        long[] mine = MoeRows.meta(0, h, dtype, routing);
        Tensor metaOut = Tensor.allocate(DType.I64, (long) n * MoeRows.META);
        for (int d = 0; d < n; d++) {
            for (int i = 0; i < MoeRows.META; i++) {
                metaOut.setLong((long) d * MoeRows.META + i, i == 0 ? sendCounts[d] : mine[i]);
            }
        }
        Tensor metaIn = metaOut;
        if (n > 1) {
            metaIn = Tensor.allocate(DType.I64, (long) n * MoeRows.META);
            pg.allToAll(metaIn, metaOut);
        }
        MoeRows.requireSame(group, "dispatch", mine, metaIn);
        long[] recvCounts = new long[n];
        long received = 0;
        for (int s = 0; s < n; s++) {
            recvCounts[s] = metaIn.getLong((long) s * MoeRows.META);
            received += recvCounts[s];
        }

        // the copies in destination order, then across
        int rowBytes = h * dtype.byteSize();
        Tensor send = Tensor.allocate(dtype, copies, h);
        Tensor sendIds = Tensor.allocate(DType.I32, copies);
        for (int c = 0; c < copies; c++) {
            MoeRows.copyRow(send, position[c], hidden, c / k, rowBytes);
            sendIds.setLong(position[c], routing.expert(c / k, c % k));
        }
        Tensor recv = send;
        Tensor recvIds = sendIds;
        if (n > 1) {
            recv = Tensor.allocate(dtype, received, h);
            recvIds = Tensor.allocate(DType.I32, received);
            pg.allToAllV(recv, send, times(recvCounts, h), times(sendCounts, h));
            pg.allToAllV(recvIds, sendIds, recvCounts, sendCounts);
        }
        int[] expertIds = new int[Math.toIntExact(received)];
        for (int i = 0; i < expertIds.length; i++) {
            expertIds[i] = (int) recvIds.getLong(i);
        }
        return new Result(group.name(), recv, expertIds, routing, position, sendCounts, recvCounts);
    }

    @Override
    public Tensor combine(GroupCoordinator group, DispatchResult dispatched, Tensor expertOutput) {
        Result r = MoeRows.own(Result.class, name(), group, dispatched);
        MoeRows.requireOutputFor(r, expertOutput);
        int h = Math.toIntExact(r.tokens.size(1));
        DType dtype = r.tokens.dtype();
        Tensor back = expertOutput;
        if (group.worldSize() > 1) {
            back = Tensor.allocate(dtype, r.position.length, h);
            group.cpuGroup().allToAllV(back, expertOutput, times(r.sendCounts, h), times(r.recvCounts, h));
        }
        int k = r.routing.topK();
        Tensor out = Tensor.allocate(dtype, r.localTokens, h);
        double[] acc = new double[h];
        for (int t = 0; t < r.localTokens; t++) {
            Arrays.fill(acc, 0);
            for (int j = 0; j < k; j++) {
                MoeRows.addRow(acc, back, r.position[t * k + j], r.routing.weight(t, j));
            }
            MoeRows.putRow(out, t, acc);
        }
        return out;
    }

    private static long[] times(long[] counts, int h) {
        long[] out = new long[counts.length];
        for (int i = 0; i < counts.length; i++) {
            out[i] = Math.multiplyExact(counts[i], (long) h);
        }
        return out;
    }

    /** Rows to process; for combine: the routing, each copy's place in the send buffer and the counts. */
    private static final class Result extends MoeResult {
        final ExpertRouting routing;
        final int[] position;
        final long[] sendCounts;
        final long[] recvCounts;

        Result(String group, Tensor tokens, int[] expertIds, ExpertRouting routing, int[] position, long[] sendCounts,
               long[] recvCounts) {
            super(All2AllManagers.ALLTOALL, group, tokens, expertIds, routing.numTokens());
            this.routing = routing;
            this.position = position;
            this.sendCounts = sendCounts;
            this.recvCounts = recvCounts;
        }
    }
}
