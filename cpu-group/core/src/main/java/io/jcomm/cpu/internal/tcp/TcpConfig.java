package io.jcomm.cpu.internal.tcp;

import io.jcomm.cpu.TcpOptions;
import io.jcomm.cpu.spi.CpuBackendContext;

/**
 * The tcp backend's options (from {@link CpuBackendContext#options()}), read once and validated by
 * {@link TcpOptions#fromMap}: what each means, its range and its default is documented there.
 */
final class TcpConfig {

    final String transport;
    final long spinNanos;
    final int segmentBytes;
    final int smallBytes;
    final long maxUnexpectedBytes;
    final long sendBudgetBytes;
    final int sendBudgetMessages;
    final int socketBufferBytes;
    final boolean shm;
    final int shmThresholdBytes;
    final int shmRingBytes;
    final String shmDir;
    final int shmStagingBytes;
    final int shmCollectiveMinBytes;
    final int shmFastBytes;
    final boolean shmNativeCopy;
    final boolean shmCrossMemory;
    final String hostId;
    final boolean freshNamespace;
    final boolean connectAtCreation;

    TcpConfig(CpuBackendContext ctx) {
        this(TcpOptions.fromMap(ctx.options()));
    }

    TcpConfig(TcpOptions o) {
        transport = o.transport().value();
        spinNanos = 1000L * o.spinMicros();
        segmentBytes = o.segmentBytes();
        smallBytes = o.smallBytes();
        maxUnexpectedBytes = o.maxUnexpectedBytes();
        sendBudgetBytes = o.sendBudgetBytes();
        sendBudgetMessages = o.sendBudgetMessages();
        socketBufferBytes = o.socketBufferBytes();
        shm = o.shm() != TcpOptions.Shm.OFF;
        shmThresholdBytes = o.shmThresholdBytes();
        shmRingBytes = o.shmRingBytes();
        shmDir = o.shmDir().toString();
        shmStagingBytes = o.shmStagingBytes() & ~16383;
        shmCollectiveMinBytes = o.shmCollectiveMinBytes();
        shmFastBytes = o.shmFastBytes() & ~63;
        shmNativeCopy = o.shmNativeCopy();
        shmCrossMemory = o.shmCrossMemory();
        hostId = o.hostId().orElse(null);
        freshNamespace = o.freshNamespace();
        connectAtCreation = o.connectAtCreation();
    }
}
