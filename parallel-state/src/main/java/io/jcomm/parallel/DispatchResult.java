package io.jcomm.parallel;

import io.jcomm.api.Tensor;

/**
 * What {@link GroupCoordinator#dispatch} hands this rank: the token copies its experts must
 * process, and (inside, private to the {@link All2AllManager} that made it) what
 * {@link GroupCoordinator#combine} needs to send the results back. Pass it to {@code combine} of the
 * same group, once.
 */
public interface DispatchResult {

    /** Name of the manager that made this result (only that manager's {@code combine} accepts it). */
    String manager();

    /**
     * The token copies to process, {@code [rows x hidden]} on the host, in the input's dtype. Row
     * {@code i} is one (token, expert) pair whose expert lives on this rank; the order is the
     * manager's (grouped by source rank, then token, then slot).
     */
    Tensor tokens();

    /** The global expert id of every row of {@link #tokens()} (a copy; all are experts of this rank). */
    int[] expertIds();

    /** Number of rows of {@link #tokens()}. */
    default int rows() {
        return Math.toIntExact(tokens().size(0));
    }

    /** Number of tokens this rank dispatched: the rows {@code combine} returns. */
    int localTokens();
}
