package io.jcomm.it.parallel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.parallel.RankLayout;
import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * ParallelState, GroupCoordinator and the PP adapter across real JVMs: every rank is a separate
 * process on this host, the store is hosted by rank 0 (torchrun style), groups talk over real
 * sockets, shared memory and an Aeron media driver. Each launch runs every check of
 * {@link ParallelWorker} (membership against vLLM's formula, TP all-reduce, the TP broadcaster,
 * barriers, pipeline tensor dicts with and without the TP slice hand-off, DP/EP collectives, the
 * actor map and the Ray adapter).
 */
@Timeout(value = 240)
class ParallelStateIT {

    private static final String[] CHECKS = {"init", "membership", "tpAllReduce", "broadcaster", "barrier", "pipeline",
        "otherGroups", "moe", "actors", "done"};

    private static MultiJvm.Results run(String name, int world, int tp, int pp, int dp, boolean oneStep,
                                        Map<Integer, String> hostIds) {
        try (MultiJvm job = MultiJvm.builder().name(name).worldSize(world).mainClass(ParallelWorker.class)
                .args(Integer.toString(tp), Integer.toString(pp), Integer.toString(dp), Boolean.toString(oneStep))
                .env("JCOMM_TIMEOUT_MS", "60000")
                .envForRank(r -> hostIds.containsKey(r) ? Map.of("JCOMM_HOST_ID", hostIds.get(r)) : Map.of())
                .maxHeap("256m").deadline(Duration.ofSeconds(180)).start()) {
            MultiJvm.Results results = job.awaitAll();
            results.assertAllSucceeded();
            return results;
        }
    }

    private static void assertChecks(MultiJvm.Results r, int world) {
        for (int rank = 0; rank < world; rank++) {
            for (String c : CHECKS) {
                assertEquals(1, r.linesContaining(rank, "CHECK " + c + " OK").size(),
                        "rank " + rank + " check " + c + "\n" + String.join("\n", r.output(rank)));
            }
        }
    }

    /** Every rank of a PP group printed the same actor map, and it lists the group's actors in rank order. */
    private static void assertActorMaps(MultiJvm.Results r, RankLayout layout) {
        for (List<Integer> group : layout.ppGroups()) {
            String expected = String.join(",", group.stream().map(g -> ParallelWorker.actorOf(g).toHex()).toList());
            for (int rank : group) {
                List<String> maps = r.linesContaining(rank, "MAP pp:");
                assertEquals(1, maps.size(), String.join("\n", r.output(rank)));
                assertTrue(maps.get(0).endsWith(" " + expected), maps.get(0) + " vs " + expected);
            }
        }
    }

    @Test
    void fourJvmsTp2Pp2WithTpGroupsAcrossTwoPretendNodes() {
        // ranks 0,2 on node-a and 1,3 on node-b: each TP group ({0,1}, {2,3}) spans the two "nodes", so
        // its broadcaster has a remote (UDP) reader and no shared-memory fast path; the PP groups
        // ({0,2}, {1,3}) are node-local
        Map<Integer, String> hosts = new HashMap<>();
        for (int r = 0; r < 4; r++) {
            hosts.put(r, "node-" + (r % 2 == 0 ? "a" : "b"));
        }
        MultiJvm.Results r = run("tp2pp2", 4, 2, 2, 1, false, hosts);
        assertChecks(r, 4);
        assertActorMaps(r, RankLayout.of(4, 2, 2, 1));
        for (int rank = 0; rank < 4; rank++) {
            assertEquals(1, r.linesContaining(rank, "CHECK init OK nodes=2").size());
            assertEquals(1, r.linesContaining(rank, rank % 2 == 0 ? "broadcaster OK writer nodeLocal=false"
                    : "broadcaster OK remote nodeLocal=false").size(), String.join("\n", r.output(rank)));
            assertEquals(1, r.linesContaining(rank, "barrier OK world nodeLocal=false pp nodeLocal=true").size());
        }
    }

    @Test
    void eightJvmsTp2Pp2Dp2OnOneHostInOneStep() {
        MultiJvm.Results r = run("tp2pp2dp2", 8, 2, 2, 2, true, Map.of());
        assertChecks(r, 8);
        assertActorMaps(r, RankLayout.of(8, 2, 2, 2));
        for (int rank = 0; rank < 8; rank++) {
            assertEquals(1, r.linesContaining(rank, "CHECK init OK nodes=1").size());
            assertEquals(1, r.linesContaining(rank, "barrier OK world nodeLocal=true pp nodeLocal=true").size());
            assertEquals(1, r.linesContaining(rank, rank % 2 == 0 ? "broadcaster OK writer nodeLocal=true"
                    : "broadcaster OK local nodeLocal=true").size(), String.join("\n", r.output(rank)));
        }
    }
}
