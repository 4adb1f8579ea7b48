package io.jcomm.parallel;

import io.jcomm.api.config.Settings;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.parallel.testkit.ThreadJob;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * MoE dispatch and combine over EP groups of 4, 2 and 1 ranks (threads), with both built-in
 * managers: every received row, every combined value exactly against a local computation, and the
 * two managers against each other; the ServiceLoader selection and its errors.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class MoeDispatchTest {

    private static final Duration T = Duration.ofSeconds(60);
    private static final int HIDDEN = 4;
    private static final int EXPERTS = 8;
    private static final List<String> BUILTINS = List.of(All2AllManagers.ALLGATHER_REDUCESCATTER, All2AllManagers.ALLTOALL);

    private static ParallelStateOptions.Builder quick() {
        return ParallelStateOptions.builder().tpMessageQueue(false).cpuOption("tcp.shm.ringBytes", "65536");
    }

    /** Tokens of EP rank {@code g} in case {@code c} (one rank has none). */
    private static int tokens(int c, int g) {
        return c == 1 ? 0 : new int[] {3, 0, 5, 1}[g % 4] + c;
    }

    /** Token {@code t} of EP rank {@code g}, element {@code i}: small integers, exact in F32 and BF16. */
    private static double value(int g, int t, int i) {
        return g * 8 + t + i - 2;
    }

    private static int[] ids(int c, int g, int topK) {
        int n = tokens(c, g);
        int[] ids = new int[n * topK];
        for (int t = 0; t < n; t++) {
            int e0 = (g * 3 + t * 5 + c) % EXPERTS;
            ids[t * topK] = e0;
            if (topK == 2) {
                ids[t * topK + 1] = (e0 + 1 + t % 3) % EXPERTS;
            }
        }
        return ids;
    }

    private static ExpertRouting routing(int c, int g, int topK) {
        int[] ids = ids(c, g, topK);
        if (topK == 1) {
            return ExpertRouting.top1(EXPERTS, ids);
        }
        float[] w = new float[ids.length];
        for (int i = 0; i < w.length; i++) {
            w[i] = i % 2 == 0 ? 0.75f : 0.25f;
        }
        return ExpertRouting.topK(EXPERTS, 2, ids, w);
    }

    private static Tensor hidden(int c, int g, DType dtype) {
        Tensor h = Tensor.allocate(dtype, tokens(c, g), HIDDEN);
        for (int t = 0; t < tokens(c, g); t++) {
            for (int i = 0; i < HIDDEN; i++) {
                h.setDouble((long) t * HIDDEN + i, value(g, t, i));
            }
        }
        return h;
    }

    /**
     * Dispatches case {@code c} over {@code ep} with {@code m}, checks the received rows against
     * every rank's routing (computed here), applies {@code out = in * (expert + 1)}, combines and
     * checks the result; returns it.
     */
    private static double[] roundTrip(GroupCoordinator ep, All2AllManager m, int c, int topK, DType dtype) {
        int n = ep.worldSize();
        int me = ep.rankInGroup();
        int perRank = EXPERTS / n;
        ExpertRouting routing = routing(c, me, topK);
        DispatchResult d = m.dispatch(ep, hidden(c, me, dtype), routing);
        assertEquals(m.name(), d.manager());
        assertEquals(tokens(c, me), d.localTokens());

        // expected rows: by source rank, token, slot, the copies whose expert lives here
        List<int[]> rows = new ArrayList<>();
        for (int s = 0; s < n; s++) {
            int[] ids = ids(c, s, topK);
            for (int copy = 0; copy < ids.length; copy++) {
                if (ids[copy] / perRank == me) {
                    rows.add(new int[] {s, copy / topK, ids[copy]});
                }
            }
        }
        assertEquals(rows.size(), d.rows(), "rows on EP rank " + me);
        assertArrayEquals(new long[] {rows.size(), HIDDEN}, d.tokens().shape());
        assertEquals(dtype, d.tokens().dtype());
        int[] gotIds = d.expertIds();
        Tensor out = Tensor.allocate(dtype, rows.size(), HIDDEN);
        for (int r = 0; r < rows.size(); r++) {
            int[] row = rows.get(r);
            assertEquals(row[2], gotIds[r], "expert of row " + r);
            for (int i = 0; i < HIDDEN; i++) {
                double x = d.tokens().getDouble((long) r * HIDDEN + i);
                assertEquals(value(row[0], row[1], i), x, "row " + r + " (rank " + row[0] + " token " + row[1] + ")");
                out.setDouble((long) r * HIDDEN + i, x * (gotIds[r] + 1));
            }
        }

        Tensor combined = m.combine(ep, d, out);
        assertArrayEquals(new long[] {tokens(c, me), HIDDEN}, combined.shape());
        assertEquals(dtype, combined.dtype());
        for (int t = 0; t < tokens(c, me); t++) {
            for (int i = 0; i < HIDDEN; i++) {
                double want = 0;
                for (int j = 0; j < topK; j++) {
                    want += routing.weight(t, j) * value(me, t, i) * (routing.expert(t, j) + 1);
                }
                assertEquals(want, combined.getDouble((long) t * HIDDEN + i), "token " + t + " element " + i
                        + " on EP rank " + me + " with " + m.name());
            }
        }
        return combined.toDoubleArray();
    }

    /** Every case with both built-ins; the results must be the same. */
    private static void allCases(GroupCoordinator ep) {
        ClassLoader cl = MoeDispatchTest.class.getClassLoader();
        for (int c = 0; c < 3; c++) {
            for (int topK = 1; topK <= 2; topK++) {
                // BF16 (8 significant bits) holds the top-1 sums exactly, not the weighted top-2 ones
                for (DType dtype : topK == 1 ? new DType[] {DType.F32, DType.BF16} : new DType[] {DType.F32}) {
                    List<double[]> results = new ArrayList<>();
                    for (String name : BUILTINS) {
                        results.add(roundTrip(ep, All2AllManagers.select(name, cl), c, topK, dtype));
                    }
                    assertArrayEquals(results.get(0), results.get(1), "case " + c + " top-" + topK + " " + dtype);
                }
            }
        }
    }

    @Test
    void bothBuiltinsAtEpSizes4And2And1() {
        try (ThreadJob job = ThreadJob.start(4, quick().all2allBackend(All2AllManagers.ALLTOALL).build(), T)) {
            job.run(ps -> {
                ps.initializeModelParallel(2, 1, 2); // EP = dp * tp = 4
                assertEquals(4, ps.ep().worldSize());
                assertEquals(All2AllManagers.ALLTOALL, ps.ep().all2allManager().name());
                allCases(ps.ep());
                // through the coordinator, with the configured manager
                ExpertRouting r = routing(0, ps.ep().rankInGroup(), 1);
                DispatchResult d = ps.ep().dispatch(hidden(0, ps.ep().rankInGroup(), DType.F32), r);
                assertEquals(All2AllManagers.ALLTOALL, d.manager());
                Tensor back = ps.ep().combine(d, d.tokens());
                assertTrue(back.contentEquals(hidden(0, ps.ep().rankInGroup(), DType.F32)));
                ps.destroyModelParallel();

                ps.initializeModelParallel(2, 2); // dp = 1: EP = tp = 2
                assertEquals(2, ps.ep().worldSize());
                allCases(ps.ep());
                ps.destroyModelParallel();

                ps.initializeModelParallel(1, 4); // EP = 1: nothing moves
                assertEquals(1, ps.ep().worldSize());
                allCases(ps.ep());
            }, T.multipliedBy(2));
        }
    }

    @Test
    void everyRankWithoutTokensAndMismatchedLayouts() {
        try (ThreadJob job = ThreadJob.start(2, quick().build(), T)) {
            job.run(ps -> {
                ps.initializeModelParallel(1, 1, 2); // EP = dp = 2
                GroupCoordinator ep = ps.ep();
                assertEquals(All2AllManagers.ALLGATHER_REDUCESCATTER, ep.all2allManager().name());
                for (String name : BUILTINS) {
                    All2AllManager m = All2AllManagers.select(name, getClass().getClassLoader());
                    DispatchResult d = m.dispatch(ep, Tensor.allocate(DType.F32, 0, HIDDEN),
                            ExpertRouting.top1(EXPERTS, new int[0]));
                    assertEquals(0, d.rows());
                    assertArrayEquals(new long[] {0, HIDDEN}, m.combine(ep, d, d.tokens()).shape());
                    // a result of the other manager is refused
                    All2AllManager other = All2AllManagers.select(BUILTINS.get(1 - BUILTINS.indexOf(name)),
                            getClass().getClassLoader());
                    assertThrows(IllegalArgumentException.class, () -> other.combine(ep, d, d.tokens()));
                }
            }, T);
            // hidden sizes differ: every rank fails, naming the layout
            for (String name : BUILTINS) {
                List<Object> outcomes = job.outcomes(ps -> {
                    assertEquals(2, ps.ep().worldSize());
                    int h = ps.rank() == 0 ? HIDDEN : HIDDEN + 1;
                    All2AllManager m = All2AllManagers.select(name, getClass().getClassLoader());
                    return m.dispatch(ps.ep(), Tensor.allocate(DType.F32, 1, h), ExpertRouting.top1(EXPERTS, new int[] {0}));
                }, T);
                for (Object o : outcomes) {
                    CollectiveMismatchException e = assertInstanceOf(CollectiveMismatchException.class, o, name);
                    assertTrue(e.getMessage().contains("hidden size"), e.getMessage());
                }
            }
        }
    }

    @Test
    void selectionByNameOptionAndEnvironment() {
        ClassLoader cl = getClass().getClassLoader();
        assertEquals(List.of(All2AllManagers.ALLGATHER_REDUCESCATTER, All2AllManagers.ALLTOALL),
                List.copyOf(All2AllManagers.providers(cl).keySet()));
        assertEquals(All2AllManagers.ALLGATHER_REDUCESCATTER, All2AllManagers.select(null, cl).name());
        assertEquals(All2AllManagers.ALLTOALL, All2AllManagers.select(" AllToAll ", cl).name());
        assertEquals(All2AllManagers.ALLGATHER_REDUCESCATTER, All2AllManagers.resolve(null, Map.of(), cl).name());
        assertEquals(All2AllManagers.ALLTOALL,
                All2AllManagers.resolve(null, Map.of(Settings.ALL2ALL_BACKEND.name(), "alltoall"), cl).name());
        assertEquals(All2AllManagers.ALLGATHER_REDUCESCATTER, All2AllManagers.resolve("allgather-reducescatter",
                Map.of(Settings.ALL2ALL_BACKEND.name(), "alltoall"), cl).name());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> All2AllManagers.select("deepep", cl));
        assertEquals("unknown all2all backend 'deepep'; known: [allgather-reducescatter, alltoall]", e.getMessage());
        assertEquals("alltoall", ParallelStateOptions.builder().all2allBackend("alltoall").build().toBuilder().build()
                .all2allBackend());

        // an unknown name fails the state's creation
        DistributedConfig cfg = ThreadJob.config(0, 1, "h", T);
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> ParallelState.initialize(cfg,
                new InMemoryStore(T), quick().all2allBackend("nope").build()).close());
        assertTrue(bad.getMessage().contains("known: [allgather-reducescatter, alltoall]"), bad.getMessage());
    }

    @Test
    void routingIsChecked() {
        assertThrows(IllegalArgumentException.class, () -> ExpertRouting.top1(4, new int[] {4}));
        assertThrows(IllegalArgumentException.class, () -> ExpertRouting.topK(4, 2, new int[] {0, 1, 2}, new float[3]));
        assertThrows(IllegalArgumentException.class, () -> ExpertRouting.topK(4, 1, new int[] {0}, new float[] {Float.NaN}));
        ExpertRouting r = ExpertRouting.topK(8, 2, new int[] {7, 2}, new float[] {0.5f, 0.5f});
        assertEquals(1, r.numTokens());
        assertEquals(1, r.ownerRank(7, 2));
        assertEquals(3, r.ownerRank(7, 4));
        assertEquals(2, r.expertsPerRank(4));
        assertThrows(IllegalArgumentException.class, () -> r.expertsPerRank(3));
    }
}
