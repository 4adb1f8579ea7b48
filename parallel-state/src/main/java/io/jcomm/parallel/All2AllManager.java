package io.jcomm.parallel;

import io.jcomm.api.Tensor;

/**
 * Moves the tokens of a mixture-of-experts layer to the ranks holding their experts and the
 * experts' outputs back (vLLM's {@code All2AllManagerBase}), over an expert-parallel group. Found by
 * name through {@link All2AllManagerProvider}; the built-ins are {@code allgather-reducescatter}
 * (the default, vLLM's naive scheme: every rank sees every token) and {@code alltoall} (each token
 * copy goes only to its expert's rank, with {@code allToAllV}). Used through
 * {@link GroupCoordinator#dispatch} and {@link GroupCoordinator#combine}.
 *
 * <h2>Contract</h2>
 * Both calls are collective over the group: every member calls {@code dispatch}, then (after
 * running its experts on {@link DispatchResult#tokens()}) {@code combine}, in the same order as the
 * other members. Per rank:
 * <ul>
 *   <li>{@code hidden} is a host tensor {@code [tokens x hidden]}; the token count may differ from
 *       rank to rank and may be zero; the hidden size, the dtype, {@link ExpertRouting#numExperts()}
 *       and {@link ExpertRouting#topK()} must be the same on every member (a difference fails every
 *       rank with a {@link io.jcomm.api.CollectiveMismatchException}), and the expert count must be
 *       divisible by the group size.</li>
 *   <li>{@code dispatch} returns the copies of tokens (from every member) whose experts live on this
 *       rank, with their expert ids.</li>
 *   <li>{@code expertOutput} for {@code combine} is a host tensor with the shape and dtype of
 *       {@link DispatchResult#tokens()}: row {@code i} is the output of expert
 *       {@code expertIds()[i]} for row {@code i}.</li>
 *   <li>{@code combine} returns this rank's tokens' results, {@code [localTokens x hidden]} in the
 *       input's order: {@code out[t] = sum over j < topK of weight(t, j) * output of expert(t, j) for token t}.</li>
 * </ul>
 * Every manager computes the same sums; the order of the additions may differ, so results are equal
 * bit for bit when the sums are exact in the dtype (e.g. top-1 with weight 1), and otherwise to the
 * dtype's rounding. A group of one member moves nothing.
 *
 * <p>Implementations are stateless (or immutable) and thread safe: one instance serves every group.
 */
public interface All2AllManager {

    /** The name it is selected by, e.g. {@code alltoall}. */
    String name();

    /** Sends this rank's token copies to the ranks of their experts; see the class contract. */
    DispatchResult dispatch(GroupCoordinator group, Tensor hidden, ExpertRouting routing);

    /**
     * Sends the experts' outputs back and returns this rank's tokens' weighted sums, in the order
     * they were dispatched; see the class contract.
     *
     * @throws IllegalArgumentException if {@code dispatched} was made by another manager, or the
     *         output does not match its tokens
     */
    Tensor combine(GroupCoordinator group, DispatchResult dispatched, Tensor expertOutput);
}
