package io.jcomm.it.device;

import io.jcomm.device.internal.nccl.NcclProbe;

/**
 * Provider {@code cuda:nccl} across real JVMs, one GPU per rank (NCCL refuses two ranks of one
 * communicator on the same GPU). Runs where {@code JCOMM_GPU_COUNT} (set by scripts/gpu-check.sh)
 * says there are at least two GPUs and the NCCL probe is positive; skipped with the reason
 * elsewhere, e.g. on this project's GPU-less CI.
 */
class NcclMultiGpuIT extends AbstractDeviceConformanceIT {

    private static int gpus() {
        try {
            return Integer.parseInt(System.getenv().getOrDefault("JCOMM_GPU_COUNT", "0").trim());
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    @Override
    protected String skipReason() {
        if (gpus() < 2) {
            return "multi-rank NCCL needs >= 2 GPUs (JCOMM_GPU_COUNT=" + gpus() + "); scripts/gpu-check.sh sets it on GPU hosts";
        }
        if (!NcclProbe.system().availability().available()) {
            return "NCCL unavailable: " + NcclProbe.system().availability().reason();
        }
        return null;
    }

    @Override
    protected int[] worldSizes() {
        return gpus() >= 4 ? new int[] {2, 4} : new int[] {2};
    }

    @Override
    protected String deviceType() {
        return "cuda";
    }

    @Override
    protected String configuredProvider() {
        return "cuda:nccl";
    }

    @Override
    protected String expectedProvider() {
        return "cuda:nccl";
    }
}
