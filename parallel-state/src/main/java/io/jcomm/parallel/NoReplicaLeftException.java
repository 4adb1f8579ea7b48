package io.jcomm.parallel;

import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;

/**
 * {@link ParallelState#shrink} found that every data-parallel replica lost a rank: there is nothing to go
 * on with, and calling it again cannot help. Names the first dead rank.
 */
public final class NoReplicaLeftException extends PeerFailureException {

    private static final long serialVersionUID = 1L;

    public NoReplicaLeftException(OpContext context, int deadRank, String detail) {
        super(context, deadRank, detail);
    }
}
