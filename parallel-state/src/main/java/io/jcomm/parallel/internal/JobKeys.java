package io.jcomm.parallel.internal;

import io.jcomm.api.store.Store;
import io.jcomm.runtime.StoreList;

/**
 * The layout of a job's keys in its store (under {@code ParallelStateOptions.storePrefix()}), in one place, as
 * Aeron keeps a buffer's layout in a descriptor class: every key {@code ParallelState}, its host exchange, its
 * media drivers and its recovery read or write is spelled here.
 *
 * <h2>Counters</h2>
 * <ul>
 *   <li><b>incarnation</b>: the store's count of this start of the job ({@link #incarnationCounter}, one per
 *       rank, counted alike by every rank): a second {@code ParallelState} on the same store gets the next one,
 *       so that it never reads an earlier state's keys. Group namespaces start with {@code s<incarnation>}.</li>
 *   <li><b>generation</b>: the job's groups after a recovery. The groups made at the start are generation 0;
 *       recovery round r, when it succeeds, makes generation r. A round that fails is given up, and the next
 *       call starts round r + 1.</li>
 *   <li><b>layout epoch</b>: how many times this state made its model-parallel groups
 *       ({@code initializeModelParallel}); their namespace ends with {@code mp<epoch>}.</li>
 * </ul>
 */
public final class JobKeys {

    /** Longest host id accepted in a value under these keys (host exchange, vacancies). */
    public static final int MAX_HOST_ID_BYTES = 1024;

    private JobKeys() {
    }

    /** The counter of rank {@code rank}'s incarnations on the store. */
    public static String incarnationCounter(int rank) {
        return "ps/instance/" + rank;
    }

    /** Where rank {@code rank} of incarnation {@code incarnation} publishes its host id (and rank 0 the job nonce). */
    public static String hostInfo(long incarnation, int rank) {
        return "ps/" + incarnation + "/host/" + rank;
    }

    /** Where the media driver {@code driver} of the host with node rank {@code node} publishes its directory. */
    public static String media(String driver, int node) {
        return "ps/" + driver + "/media/" + node;
    }

    /** Where rank {@code rank} says it started the media driver {@code driver}'s attach (its groups are ready). */
    public static String mediaReady(String driver, int rank) {
        return "ps/" + driver + "/ready/" + rank;
    }

    /** The prefix of a background broadcaster's keys: group {@code name} of namespace {@code groupNamespace}. */
    public static String lateBroadcaster(long incarnation, String groupNamespace, String name) {
        return "ps/m" + incarnation + "/mq/" + groupNamespace + "/" + name + "/";
    }

    // ------------------------------------------------------------------ recovery

    /** The counter of {@link #vacancies}. */
    public static final String VACANCY_COUNT = "ps/rec/vac/n";
    /** The latest round that posted vacancies. */
    public static final String VACANCY_ROUND = "ps/rec/vac/round";
    /** Most vacancies a job posts over its life. */
    static final long MAX_VACANCIES = 1 << 20;

    /** The vacancies posted, one entry per lost rank: {@code "<incarnation> <round> <rank>"}. */
    public static StoreList vacancies(Store keys) {
        return new StoreList(keys, VACANCY_COUNT, "ps/rec/vac/", MAX_VACANCIES);
    }

    /** The keys of the recovery rounds of incarnation {@code incarnation}. */
    public static Recovery recovery(long incarnation) {
        return new Recovery(incarnation);
    }

    /** The recovery keys of one incarnation. */
    public static final class Recovery {
        private final String base;

        private Recovery(long incarnation) {
            this.base = "ps/rec/" + incarnation + "/";
        }

        /** Rank {@code rank} left the job with its replica (any round). */
        public String left(int rank) {
            return base + "left/" + rank;
        }

        /** The keys of round {@code round}. */
        public Round round(int round) {
            return new Round(base + round + "/");
        }
    }

    /** The keys of one recovery round. */
    public static final class Round {
        private final String base;

        private Round(String base) {
            this.base = base;
        }

        /** Rank {@code rank} answered the roll call. */
        public String alive(int rank) {
            return base + "alive/" + rank;
        }

        /** The roll call's verdict (the first proposal wins). */
        public String verdict() {
            return base + "verdict";
        }

        /** What a replacement needs to join ({@code Vacancy}). */
        public String vacancy() {
            return base + "vacancy";
        }

        /** The process that claimed rank {@code rank}'s vacancy. */
        public String claim(int rank) {
            return base + "claim/" + rank;
        }

        /** The host of rank {@code rank}'s replacement. */
        public String host(int rank) {
            return base + "host/" + rank;
        }

        /** Rank {@code rank}'s replacement joined. */
        public String joined(int rank) {
            return base + "joined/" + rank;
        }

        /** What rank {@code rank} decided the next generation is. */
        public String decision(int rank) {
            return base + "decision/" + rank;
        }

        /** A member gave the round up. */
        public String abort() {
            return base + "abort";
        }
    }
}
