package io.jcomm.parallel.internal.moe;

import io.jcomm.api.Tensor;
import io.jcomm.parallel.DispatchResult;

/** What every built-in result holds: the manager and group that made it, the rows and their experts. */
abstract class MoeResult implements DispatchResult {

    final String manager;
    final String group;
    final Tensor tokens;
    final int[] expertIds;
    final int localTokens;

    MoeResult(String manager, String group, Tensor tokens, int[] expertIds, int localTokens) {
        this.manager = manager;
        this.group = group;
        this.tokens = tokens;
        this.expertIds = expertIds;
        this.localTokens = localTokens;
    }

    @Override
    public final String manager() {
        return manager;
    }

    @Override
    public final Tensor tokens() {
        return tokens;
    }

    @Override
    public final int[] expertIds() {
        return expertIds.clone();
    }

    @Override
    public final int localTokens() {
        return localTokens;
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "{" + manager + " over " + group + ": " + tokens + " for "
                + localTokens + " local tokens}";
    }
}
