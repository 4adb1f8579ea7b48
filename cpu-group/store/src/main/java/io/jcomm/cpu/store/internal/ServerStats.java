package io.jcomm.cpu.store.internal;

/**
 * Counters of one server. Written only by the event-loop thread; the volatile fields make them
 * readable from any thread (a reader may see a counter a moment old).
 */
public final class ServerStats {
    volatile long connectionsOpened;
    volatile long connectionsOpen;
    volatile long connectionsFaulted;
    volatile long commands;
    volatile long droppedWaits;
    volatile long largestRequestBytes;
    volatile long peakBufferedBytes;
    volatile long peakBufferCapacity;
    volatile long pendingEvicted;
    volatile long incompleteDropped;
    volatile long memberDeaths;
    volatile long memberFailuresSent;
    volatile long retriesAnswered;
    volatile long changesRefused;

    /** Changes with a request id already applied, answered without applying them again (retries). */
    public long retriesAnswered() {
        return retriesAnswered;
    }

    /** Changes with a request id refused with a reply (full store or data file, bad ADD). */
    public long changesRefused() {
        return changesRefused;
    }

    public long connectionsOpened() {
        return connectionsOpened;
    }

    public long connectionsOpen() {
        return connectionsOpen;
    }

    public long connectionsFaulted() {
        return connectionsFaulted;
    }

    public long commands() {
        return commands;
    }

    public long droppedWaits() {
        return droppedWaits;
    }

    public long largestRequestBytes() {
        return largestRequestBytes;
    }

    public long peakBufferedBytes() {
        return peakBufferedBytes;
    }

    public long peakBufferCapacity() {
        return peakBufferCapacity;
    }

    /** Pending connections closed to make room for a newer one (maxPendingConnections). */
    public long pendingEvicted() {
        return pendingEvicted;
    }

    /** Connections closed because they held an incomplete request too long. */
    public long incompleteDropped() {
        return incompleteDropped;
    }

    /** Declared connections that ended without a goodbye. */
    public long memberDeaths() {
        return memberDeaths;
    }

    /** WAITs answered with the member-failure reply. */
    public long memberFailuresSent() {
        return memberFailuresSent;
    }

    void buffered(int readable, int capacity) {
        if (readable > peakBufferedBytes) {
            peakBufferedBytes = readable;
        }
        if (capacity > peakBufferCapacity) {
            peakBufferCapacity = capacity;
        }
    }

    void request(int bytes) {
        commands++;
        if (bytes > largestRequestBytes) {
            largestRequestBytes = bytes;
        }
    }
}
