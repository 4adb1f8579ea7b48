package io.jcomm.cpu.store.internal;

import io.jcomm.api.DistributedConfig;
import io.jcomm.runtime.Utf8;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;

/**
 * The declared members of the jobs a server serves (the member-liveness extension): per job id, the
 * connections that declared themselves a rank of it, and the first rank that left without a goodbye.
 * Owned by the server's event-loop thread, like {@link StoreEngine}; no locks.
 *
 * <p>Bounded: at most {@value #MAX_JOBS} jobs are remembered. A new job beyond that replaces the
 * oldest job that has no declared connection left (a failed job's record is kept until then); when
 * every remembered job still has connections, the declaration is refused.
 *
 * <p>A death is final for the life of the server: a rank that declares itself again after dying is
 * accepted, but its job stays failed. Survivors that go on re-form under a new job id (a new
 * generation, {@code ParallelState.shrink}); every dead rank of a job can be asked for
 * ({@link Wire#DEAD_KEY}).
 */
public final class Members {

    /** Most jobs remembered at once. */
    public static final int MAX_JOBS = 1024;

    /** Most dead ranks remembered per job (a job's record stays bounded whatever its members declare). */
    public static final int MAX_DEAD_RANKS = 65536;

    /** One job: its live declared connections, its first death and every dead rank (up to a bound). */
    public static final class Job {
        final String id;
        /** Insertion-ordered set: a member that leaves is removed without a scan over the job's others. */
        final LinkedHashSet<ServerConnection> live = new LinkedHashSet<>(4);
        int deadRank = -1;
        long deaths;
        /** The dead ranks, sorted, without repeats; at most {@link #MAX_DEAD_RANKS}. */
        private int[] dead = new int[0];

        Job(String id) {
            this.id = id;
        }

        public String id() {
            return id;
        }

        /** The first rank that left without a goodbye, or -1. */
        public int deadRank() {
            return deadRank;
        }

        /** Every rank that left without a goodbye (sorted; the first {@value #MAX_DEAD_RANKS} distinct ones). */
        public int[] deadRanks() {
            return dead.clone();
        }

        void died(int rank) {
            int at = java.util.Arrays.binarySearch(dead, rank);
            if (at >= 0 || dead.length >= MAX_DEAD_RANKS) {
                return;
            }
            int i = -at - 1;
            int[] grown = new int[dead.length + 1];
            System.arraycopy(dead, 0, grown, 0, i);
            grown[i] = rank;
            System.arraycopy(dead, i, grown, i + 1, dead.length - i);
            dead = grown;
        }
    }

    private final LinkedHashMap<String, Job> jobs = new LinkedHashMap<>();

    /**
     * Checks a job id as it arrives on the wire.
     *
     * @return the id, or {@code null} if it is empty, longer than
     *         {@link DistributedConfig#MAX_JOB_ID_BYTES}, not UTF-8 or holds a control character
     */
    public static String decodeJobId(byte[] utf8) {
        if (utf8.length == 0 || utf8.length > DistributedConfig.MAX_JOB_ID_BYTES) {
            return null;
        }
        String s = Utf8.decodeStrict(ByteBuffer.wrap(utf8));
        return s != null && checkJobId(s) == null ? s : null;
    }

    /**
     * Why {@code jobId} cannot be a job id, or {@code null} when it can: 1 to
     * {@link DistributedConfig#MAX_JOB_ID_BYTES} bytes of UTF-8, no control characters (it appears in
     * log lines and error messages).
     */
    public static String checkJobId(String jobId) {
        if (jobId == null || jobId.isEmpty()) {
            return "the job id is empty";
        }
        int bytes = jobId.getBytes(StandardCharsets.UTF_8).length;
        if (bytes > DistributedConfig.MAX_JOB_ID_BYTES) {
            return "the job id has " + bytes + " bytes of UTF-8, more than " + DistributedConfig.MAX_JOB_ID_BYTES;
        }
        for (int i = 0; i < jobId.length(); i++) {
            char c = jobId.charAt(i);
            if (c < 0x20 || c == 0x7F || Character.isSurrogate(c) && !validSurrogate(jobId, i)) {
                return "the job id holds a control character or a lone surrogate at index " + i;
            }
        }
        return null;
    }

    private static boolean validSurrogate(String s, int i) {
        char c = s.charAt(i);
        if (Character.isHighSurrogate(c)) {
            return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
        }
        return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
    }

    /** Jobs remembered now. */
    public int jobs() {
        return jobs.size();
    }

    /**
     * Registers {@code c} as a member of {@code jobId}.
     *
     * @throws StoreFault when {@value #MAX_JOBS} jobs with live connections are remembered already
     */
    Job declare(String jobId, ServerConnection c) {
        Job job = jobs.get(jobId);
        if (job == null) {
            if (jobs.size() >= MAX_JOBS && !forgetOneIdleJob()) {
                throw new StoreFault("member declaration refused: " + MAX_JOBS + " jobs with live members are known");
            }
            job = new Job(jobId);
            jobs.put(jobId, job);
        }
        job.live.add(c);
        return job;
    }

    private boolean forgetOneIdleJob() {
        Iterator<Job> it = jobs.values().iterator();
        while (it.hasNext()) {
            if (it.next().live.isEmpty()) {
                it.remove();
                return true;
            }
        }
        return false;
    }

    /**
     * A declared connection ended. When it {@code died} (no goodbye, not closed by the server), the
     * job is marked failed and the connections of the job that wait are returned, to be told.
     */
    List<ServerConnection> left(Job job, ServerConnection c, int rank, boolean died) {
        job.live.remove(c);
        List<ServerConnection> toTell = List.of();
        if (died) {
            if (job.deadRank < 0) {
                job.deadRank = rank;
            }
            job.died(rank);
            job.deaths++;
            toTell = new ArrayList<>(job.live);
        } else if (job.live.isEmpty() && job.deadRank < 0) {
            jobs.remove(job.id);
        }
        return toTell;
    }
}
