package io.jcomm.it.parallel;

import io.jcomm.actor.PipelineCommunicator;
import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.ray.ActorId;
import io.jcomm.mq.MessageQueueOptions;
import io.jcomm.parallel.All2AllManager;
import io.jcomm.parallel.All2AllManagers;
import io.jcomm.parallel.DispatchResult;
import io.jcomm.parallel.ExpertRouting;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import io.jcomm.parallel.RankLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * One rank of {@link ParallelStateIT}: initialises the environment from the torchrun-style
 * environment (store hosted by rank 0), creates the TP/PP/DP/EP groups, and runs every check of the
 * launch in order, printing {@code CHECK <name> OK [detail]} after each (a failing check throws:
 * the worker exits non-zero and the harness reports its output).
 *
 * <p>Arguments: {@code <tp> <pp> <dp> <oneStep>}.
 */
public final class ParallelWorker {

    private ParallelWorker() {
    }

    /** The actor id of global rank {@code r} in these tests. */
    static ActorId actorOf(int r) {
        return new ActorId(0x5EED000000000000L | r, 0xAC70L * (r + 7));
    }

    static ParallelStateOptions options() {
        return ParallelStateOptions.builder()
                .messageQueueOptions(MessageQueueOptions.builder().ipcTermLength(256 << 10).ipcMtu(32768)
                        .udpTermLength(256 << 10).build())
                .build();
    }

    public static void main(String[] args) {
        int tp = Integer.parseInt(args[0]);
        int pp = Integer.parseInt(args[1]);
        int dp = Integer.parseInt(args[2]);
        boolean oneStep = Boolean.parseBoolean(args[3]);
        DistributedConfig config = DistributedConfig.fromEnvironment();
        int me = config.rank();
        ParallelState ps = oneStep
                ? ParallelState.initialize(config, options(), ParallelSizes.of(tp, pp, dp))
                : ParallelState.initialize(config, options());
        try {
            if (!oneStep) {
                ps.initializeModelParallel(tp, pp, dp);
            }
            check("init", "nodes=" + ps.topology().nodeCount() + " hosts=" + ps.topology().hostIds());
            membership(ps, tp, pp, dp, me);
            tpAllReduce(ps, me);
            broadcaster(ps);
            barriers(ps);
            pipelineDicts(ps, me);
            otherGroups(ps, me);
            moe(ps);
            actors(ps, me);
            ps.world().barrier();
            check("done", "");
        } finally {
            ps.close();
        }
    }

    static void check(String name, String detail) {
        System.out.println("CHECK " + name + " OK " + detail);
        System.out.flush();
    }

    static void require(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    private static void membership(ParallelState ps, int tp, int pp, int dp, int me) {
        RankLayout l = RankLayout.of(ps.worldSize(), tp, pp, dp);
        int ti = RankLayout.indexOf(l.tpGroups(), me);
        int pi = RankLayout.indexOf(l.ppGroups(), me);
        int di = RankLayout.indexOf(l.dpGroups(), me);
        int ei = RankLayout.indexOf(l.epGroups(), me);
        require(ps.tp().ranks().equals(l.tpGroups().get(ti)) && ps.tp().name().equals("tp:" + ti), "tp " + ps.tp());
        require(ps.pp().ranks().equals(l.ppGroups().get(pi)) && ps.pp().name().equals("pp:" + pi), "pp " + ps.pp());
        require(ps.dp().ranks().equals(l.dpGroups().get(di)) && ps.dp().name().equals("dp:" + di), "dp " + ps.dp());
        require(ps.ep().ranks().equals(l.epGroups().get(ei)) && ps.ep().name().equals("ep:" + ei), "ep " + ps.ep());
        require(ps.groups().names().equals(List.of("world", "tp:" + ti, "pp:" + pi, "dp:" + di, "ep:" + ei)),
                "registry " + ps.groups().names());
        check("membership", "tp=" + ps.tp().ranks() + " pp=" + ps.pp().ranks() + " dp=" + ps.dp().ranks()
                + " ep=" + ps.ep().ranks());
    }

    private static void tpAllReduce(ParallelState ps, int me) {
        GroupCoordinator g = ps.tp();
        long expect = g.ranks().stream().mapToLong(r -> r + 1).sum();
        Tensor t = Tensor.ofLongs(me + 1, 2L * (me + 1));
        g.allReduce(t);
        require(t.getLong(0) == expect && t.getLong(1) == 2 * expect, "tp allReduce " + Arrays.toString(t.toLongArray()));
        // a large one (ring algorithm, shared memory between the JVMs of one host)
        Tensor big = Tensor.allocate(DType.F32, 1 << 18);
        big.fill(me);
        g.allReduce(big);
        double sum = g.ranks().stream().mapToDouble(r -> r).sum();
        require(big.getDouble(0) == sum && big.getDouble((1 << 18) - 1) == sum, "tp allReduce of 1 MiB");
        check("tpAllReduce", "sum=" + expect);
    }

    private static void broadcaster(ParallelState ps) {
        GroupCoordinator g = ps.tp();
        if (g.worldSize() > 1) {
            // made in the background: wait for it, so that the loop below switches to it
            require(g.awaitMessageQueue(Duration.ofSeconds(30)).isPresent(), "TP group without a broadcaster");
        }
        for (int i = 0; i < 20; i++) {
            Map<String, Object> meta = new LinkedHashMap<>();
            meta.put("step", i);
            meta.put("from", g.rank());
            @SuppressWarnings("unchecked")
            Map<String, Object> got = g.broadcastObject(g.rankInGroup() == 0 ? meta : null, 0, Map.class);
            require(got.get("step").equals(i) && got.get("from").equals(g.firstRank()), "broadcast " + got);
        }
        if (g.worldSize() > 1) {
            require(g.broadcastsThroughQueue(), "the broadcasts did not switch to the broadcaster");
        }
        String remote = g.messageQueue().map(q -> q.isWriter() ? "writer" : q.isRemoteReader() ? "remote" : "local")
                .orElse("none");
        check("broadcaster", remote + " nodeLocal=" + g.isNodeLocal());
    }

    private static void barriers(ParallelState ps) {
        for (int i = 0; i < 10; i++) {
            ps.world().barrier();
            ps.tp().barrier();
            ps.pp().barrier();
        }
        check("barrier", "world nodeLocal=" + ps.world().isNodeLocal() + " pp nodeLocal=" + ps.pp().isNodeLocal());
    }

    /** Stage 0 hands a dict to stage 1 (and so on), plain and with the TP slice hand-off. */
    private static void pipelineDicts(ParallelState ps, int me) {
        GroupCoordinator pp = ps.pp();
        GroupCoordinator tp = ps.tp();
        if (pp.worldSize() < 2) {
            check("pipeline", "single stage");
            return;
        }
        int stage = pp.rankInGroup();
        int tpIndex = tp.rankInGroup();
        for (GroupCoordinator ag : new GroupCoordinator[] {null, tp}) {
            if (stage < pp.worldSize() - 1) {
                pp.sendTensorDict(dict(stage, tpIndex), stage + 1, ag);
            }
            if (stage > 0) {
                Map<String, Object> got = pp.recvTensorDict(stage - 1, ag);
                Map<String, Object> want = dict(stage - 1, tpIndex);
                require(got.keySet().equals(want.keySet()), "keys " + got.keySet());
                for (String k : want.keySet()) {
                    Object w = want.get(k);
                    Object v = got.get(k);
                    require(w instanceof Tensor ? ((Tensor) w).contentEquals((Tensor) v) : w.equals(v),
                            "value of " + k + ": " + v);
                }
            }
        }
        check("pipeline", "stage=" + stage + " sliced-by=" + tp.name());
    }

    /** Replicated across the TP group (the same on every TP rank of a stage), as the hand-off assumes. */
    private static Map<String, Object> dict(int stage, int tpIndex) {
        Map<String, Object> d = new LinkedHashMap<>();
        Tensor hidden = Tensor.allocate(DType.F32, 4, 1024);
        for (int i = 0; i < hidden.numel(); i++) {
            hidden.setDouble(i, stage * 10_000 + i);
        }
        d.put("hidden", hidden);
        d.put("residual", Tensor.ofInts(stage, 1, 2)); // 3 elements: sent whole
        d.put("empty", Tensor.allocate(DType.F16, 0));
        d.put("stage", stage);
        return d;
    }

    private static void otherGroups(ParallelState ps, int me) {
        long dpSum = ps.dp().allReduce(Tensor.ofLongs(me)).getLong(0);
        require(dpSum == ps.dp().ranks().stream().mapToLong(Integer::longValue).sum(), "dp allReduce " + dpSum);
        long[] agreed = ps.dpAgree(new long[] {me, -me}, io.jcomm.api.ReduceOp.MAX);
        long dpMax = ps.dp().ranks().stream().mapToLong(Integer::longValue).max().orElseThrow();
        long dpMin = ps.dp().ranks().stream().mapToLong(Integer::longValue).min().orElseThrow();
        require(agreed[0] == dpMax && agreed[1] == -dpMin, "dpAgree " + java.util.Arrays.toString(agreed));
        long epSum = ps.ep().allReduce(Tensor.ofLongs(me)).getLong(0);
        require(epSum == ps.ep().ranks().stream().mapToLong(Integer::longValue).sum(), "ep allReduce " + epSum);
        Tensor all = ps.world().allGather(Tensor.ofInts(me), 0);
        for (int r = 0; r < ps.worldSize(); r++) {
            require(all.getLong(r) == r, "world allGather " + Arrays.toString(all.toLongArray()));
        }
        check("otherGroups", "dp=" + dpSum + " ep=" + epSum);
    }

    /**
     * MoE dispatch/combine over the EP group with both built-in managers: group rank g has g % 3 tokens
     * (so rank 0 none), top-2 of 2 * size experts; out = in * (expert + 1), combined exactly.
     */
    private static void moe(ParallelState ps) {
        GroupCoordinator ep = ps.ep();
        int g = ep.rankInGroup();
        int tokens = g % 3;
        int hidden = 3;
        int experts = 2 * ep.worldSize();
        int[] ids = new int[tokens * 2];
        float[] weights = new float[tokens * 2];
        Tensor x = Tensor.allocate(DType.F32, tokens, hidden);
        for (int t = 0; t < tokens; t++) {
            ids[2 * t] = (g + t) % experts;
            ids[2 * t + 1] = (g + 2 * t + 2) % experts;
            weights[2 * t] = 0.5f;
            weights[2 * t + 1] = 0.5f;
            for (int i = 0; i < hidden; i++) {
                x.setDouble((long) t * hidden + i, g * 4 + t + i);
            }
        }
        ExpertRouting routing = ExpertRouting.topK(experts, 2, ids, weights);
        int rows = 0;
        for (String name : List.of(All2AllManagers.ALLGATHER_REDUCESCATTER, All2AllManagers.ALLTOALL)) {
            All2AllManager m = All2AllManagers.select(name, ParallelWorker.class.getClassLoader());
            DispatchResult d = m.dispatch(ep, x, routing);
            int[] got = d.expertIds();
            Tensor out = Tensor.allocate(DType.F32, d.rows(), hidden);
            for (int r = 0; r < d.rows(); r++) {
                require(got[r] / (experts / ep.worldSize()) == g, name + " row " + r + " of expert " + got[r]);
                for (int i = 0; i < hidden; i++) {
                    out.setDouble((long) r * hidden + i, d.tokens().getDouble((long) r * hidden + i) * (got[r] + 1));
                }
            }
            Tensor y = m.combine(ep, d, out);
            for (int t = 0; t < tokens; t++) {
                for (int i = 0; i < hidden; i++) {
                    double want = 0.5 * (g * 4 + t + i) * (ids[2 * t] + 1) + 0.5 * (g * 4 + t + i) * (ids[2 * t + 1] + 1);
                    require(y.getDouble((long) t * hidden + i) == want, name + " token " + t + " element " + i + ": "
                            + y.getDouble((long) t * hidden + i) + " != " + want);
                }
            }
            rows = d.rows();
        }
        check("moe", "ep=" + ep.worldSize() + " rows=" + rows);
    }

    private static void actors(ParallelState ps, int me) {
        GroupCoordinator pp = ps.pp();
        PipelineCommunicator c = PipelineCommunicator.create(pp, actorOf(me));
        c.initialize(-1);
        String map = c.actorHandles().stream().map(ActorId::toHex).collect(Collectors.joining(","));
        System.out.println("MAP " + pp.name() + " " + map);
        for (int i = 0; i < pp.worldSize(); i++) {
            require(c.rankOf(actorOf(pp.ranks().get(i))) == i, "rankOf " + i);
        }
        int n = c.worldSize();
        int self = c.selfRank();
        if (n > 1) {
            // a ring by actor id: send to the actor of the next stage, receive from the previous one
            int next = c.rankOf(actorOf(pp.ranks().get((self + 1) % n)));
            int prev = c.rankOf(actorOf(pp.ranks().get((self + n - 1) % n)));
            Tensor payload = Tensor.ofDoubles(me, me * 0.5);
            Tensor got;
            if (self % 2 == 0) {
                c.send(payload, next);
                got = c.recv(new long[] {2}, DType.F64, prev, (s, d) -> Tensor.allocate(d, s));
            } else {
                got = c.recv(new long[] {2}, DType.F64, prev, (s, d) -> Tensor.allocate(d, s));
                c.send(payload, next);
            }
            int from = pp.ranks().get(prev);
            require(got.getDouble(0) == from && got.getDouble(1) == from * 0.5, "adapter recv " + Arrays.toString(got.toDoubleArray()));
        }
        Tensor sum = Tensor.allocate(DType.I64, 1);
        c.allReduce(sum, Tensor.ofLongs(me), ReduceOp.SUM);
        require(sum.getLong(0) == pp.ranks().stream().mapToLong(Integer::longValue).sum(), "adapter allReduce");
        Tensor gathered = Tensor.allocate(DType.I32, n);
        c.allGather(gathered, Tensor.ofInts(me));
        List<Long> want = new ArrayList<>();
        pp.ranks().forEach(r -> want.add((long) r));
        require(Arrays.stream(gathered.toLongArray()).boxed().collect(Collectors.toList()).equals(want), "adapter allGather");
        Tensor part = Tensor.allocate(DType.F32, 2);
        float[] src = new float[2 * n];
        for (int i = 0; i < src.length; i++) {
            src[i] = i + me;
        }
        c.reduceScatter(part, Tensor.ofFloats(src), ReduceOp.SUM);
        double base = pp.ranks().stream().mapToDouble(Integer::doubleValue).sum();
        require(part.getDouble(0) == n * (2.0 * self) + base && part.getDouble(1) == n * (2.0 * self + 1) + base,
                "adapter reduceScatter " + Arrays.toString(part.toDoubleArray()));
        require(c.transportName().equals("cpu"), "transport " + c.transportName());
        c.destroy();
        check("actors", "group=" + pp.name() + " self=" + self);
    }
}
