package io.jcomm.parallel.internal.recovery;

import io.jcomm.runtime.Backoff;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import io.jcomm.runtime.Entropy;
import io.jcomm.runtime.StoreList;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import io.jcomm.parallel.HostTopology;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.internal.JobKeys;
import java.time.Duration;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The replacement's side of a replace round: a restarted or spare process ({@link DistributedConfig#role()}) waits
 * for a vacancy (a restarted one for its own rank, a spare for any), claims it atomically (compare-and-set: one
 * process per vacancy), says on which host it runs, says it joined, and hands the claim to the state, which agrees
 * with the survivors ({@link RecoveryRound#agree}) and forms the generation. A round that fails before the groups
 * exist sends it back to waiting, for the vacancies of the next round.
 */
public final class Joining {

    private static final Logger LOG = LoggerFactory.getLogger(Joining.class);

    private Joining() {
    }

    /**
     * A vacancy this process took.
     *
     * @param rank     the lost rank whose place it takes
     * @param round    the round it joins
     * @param vacancy  what the survivors posted
     * @param config   this process's configuration as that rank
     * @param topology every configured rank's host, this process's included
     * @param next     the next generation's store client, declared as that rank under {@code <job>/g<round>}
     */
    public record Claim(int rank, int round, Vacancy vacancy, DistributedConfig config, HostTopology topology,
                        Store next) {

        /** The keys of the round it joins. */
        public JobKeys.Round keys() {
            return JobKeys.recovery(vacancy.incarnation()).round(round);
        }
    }

    /** What the state does with a claim: agree with the survivors and form the generation. */
    @FunctionalInterface
    public interface Attempt<T> {
        /** Joins through {@code claim}; a {@link CommException} sends the process back to waiting. */
        T join(Claim claim);
    }

    /**
     * Waits for a vacancy, claims it and hands it to {@code attempt}, until an attempt succeeds.
     *
     * @param store       a client of the job's store not declared under the job id (the lost rank stays dead there)
     * @param storePrefix the prefix of the job's keys
     * @param sizes       the sizes this process asks for (checked against the job's), or null
     * @throws CommTimeoutException when a restarted process finds no vacancy of its rank within the timeout
     * @throws CommClosedException  when every worker exited (a spare not needed), or another process took this
     *                              restarted rank's place
     */
    public static <T> T run(DistributedConfig config, Store store, String storePrefix, ParallelSizes sizes,
                            Attempt<T> attempt) {
        DistributedConfig.Role role = config.role();
        OpContext ctx = OpContext.of("recovery", role == DistributedConfig.Role.SPARE ? -1 : config.rank(), "join");
        Store keys = new PrefixStore(storePrefix, store);
        // a restarted rank waits for its vacancy as long as a collective would; a spare for as long as the job
        long deadline = role == DistributedConfig.Role.SPARE ? Long.MAX_VALUE
                : System.nanoTime() + config.timeout().toNanos();
        StoreList vacancies = JobKeys.vacancies(keys);
        StoreList.Reader postings = vacancies.reader();
        Backoff pause = Backoff.doubling(Duration.ofNanos(200_000), Duration.ofMillis(5));
        while (true) {
            long seq = postings.next();
            if (seq < 0) {
                if (store.check(List.of(DistributedConfig.LAUNCHER_DONE_KEY))) {
                    throw new CommClosedException(ctx, "the job ended without needing this process (every worker exited)");
                }
                if (System.nanoTime() - deadline > 0) {
                    throw new CommTimeoutException(ctx, "no vacancy for rank " + config.rank() + " within "
                            + config.timeout().toMillis() + " ms");
                }
                pause.pause();
                continue;
            }
            pause.reset();
            String[] f = Recoveries.text(vacancies.get(seq, config.timeout()), 64, ctx).split(" ");
            if (f.length != 3) {
                throw new ProtocolException(ctx, "malformed vacancy " + seq);
            }
            long incarnation;
            int round;
            int rank;
            int latest;
            try {
                incarnation = Long.parseLong(f[0]);
                round = Integer.parseInt(f[1]);
                rank = Integer.parseInt(f[2]);
                latest = Integer.parseInt(Recoveries.text(keys.get(JobKeys.VACANCY_ROUND, config.timeout()), 16, ctx));
            } catch (NumberFormatException e) {
                throw new ProtocolException(ctx, "malformed vacancy " + seq + ": " + e.getMessage());
            }
            JobKeys.Round rk = JobKeys.recovery(incarnation).round(round);
            if (rank < 0 || rank >= config.worldSize() || round < latest
                    || role == DistributedConfig.Role.RESTARTED && rank != config.rank()
                    || keys.check(List.of(rk.abort()))) {
                continue; // not this process's, or of a round already over
            }
            Vacancy v = Vacancy.decode(keys.get(rk.vacancy(), config.timeout()), config.worldSize(), ctx);
            if (sizes != null && (sizes.tp() != v.tp() || sizes.pp() != v.pp())) {
                throw new IllegalArgumentException("this process asks for tp=" + sizes.tp() + " pp=" + sizes.pp()
                        + ", the job it joins has tp=" + v.tp() + " pp=" + v.pp());
            }
            List<String> hosts = new ArrayList<>(v.hosts());
            hosts.set(rank, config.hostId());
            HostTopology topology = HostTopology.of(hosts);
            List<Integer> onHost = topology.ranksOnHostOf(rank);
            DistributedConfig mine = config.toBuilder().rank(rank).localRank(onHost.indexOf(rank))
                    .localWorldSize(onHost.size()).build();
            Store next = store.withMember(config.jobId() + "/g" + round, rank);
            byte[] token = Long.toHexString(Entropy.nextLong()).getBytes(StandardCharsets.UTF_8);
            byte[] holder = keys.compareSet(rk.claim(rank), new byte[0], token);
            if (!Arrays.equals(holder, token)) {
                next.close();
                if (role == DistributedConfig.Role.RESTARTED) {
                    throw new CommClosedException(ctx, "another process took the place of rank " + rank);
                }
                continue;
            }
            keys.set(rk.host(rank), config.hostId().getBytes(StandardCharsets.UTF_8));
            keys.set(rk.joined(rank), new byte[] {1});
            try {
                return attempt.join(new Claim(rank, round, v, mine, topology, next));
            } catch (CommException e) {
                next.close();
                LOG.info("rank {}: joining round {} failed ({}); waiting for the next vacancy", rank, round, e.getMessage());
            }
        }
    }
}
