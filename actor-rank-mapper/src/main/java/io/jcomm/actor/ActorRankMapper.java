package io.jcomm.actor;

import io.jcomm.api.Tensor;
import io.jcomm.api.ray.ActorId;
import io.jcomm.parallel.GroupCoordinator;
import java.util.List;
import java.util.Objects;

/**
 * Builds the actor-id to rank map of a group the way vLLM's Ray adapter does: every rank
 * all-gathers its actor id, as its 32 hex characters in 32 {@code uint8}, over the group's data
 * plane; rank r's id is bytes {@code [32r, 32r + 32)} of the result. Collective over the group.
 *
 * <p>The id is a host tensor, so on a CPU job it travels over the group's device communicator
 * (the {@code cpu} provider). On an accelerator group it travels over the same group's host path
 * unless a {@link DeviceStaging} is given, which places it on the device first (so the gather runs
 * on NCCL, as in vLLM) and copies the result back.
 */
public final class ActorRankMapper {

    private ActorRankMapper() {
    }

    /** Maps the actors of {@code group}; {@code self} is this rank's actor. */
    public static ActorRankMap map(GroupCoordinator group, ActorId self) {
        return map(group, self, null);
    }

    /**
     * Maps the actors of {@code group}, staging the ids through device memory when {@code staging}
     * is given.
     */
    public static ActorRankMap map(GroupCoordinator group, ActorId self, DeviceStaging staging) {
        Objects.requireNonNull(group, "group");
        Objects.requireNonNull(self, "self");
        int n = group.worldSize();
        if (n == 1) {
            return ActorRankMap.of(group.name(), List.of(self));
        }
        Tensor mine = Tensor.ofBytes(self.toAsciiBytes());
        Tensor all = Tensor.allocate(mine.dtype(), (long) n * ActorId.HEX_LENGTH);
        if (staging == null) {
            group.allGather(all, mine, 0);
        } else {
            Tensor onDevice = staging.toDevice(mine);
            Tensor gathered = group.allGather(onDevice, 0);
            staging.toHost(gathered, all);
        }
        return ActorRankMap.fromGathered(group.name(), all.toByteArray(), n);
    }

    /** Moves small host tensors to and from the group's device (a thin hook for accelerator jobs). */
    public interface DeviceStaging {

        /** A copy of {@code host} on the device (complete when this returns). */
        Tensor toDevice(Tensor host);

        /** Copies {@code device} into {@code host} (complete when this returns). */
        void toHost(Tensor device, Tensor host);
    }
}
