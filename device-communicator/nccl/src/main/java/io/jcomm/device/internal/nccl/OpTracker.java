package io.jcomm.device.internal.nccl;

import java.util.ArrayDeque;

/**
 * Completion tracking of enqueued operations, for the watchdog's deadline: after each operation the
 * data thread records a pooled CUDA event on the caller's stream; the watchdog queries the oldest
 * event and reports an operation that is still pending after its deadline. Events are reused only
 * after they completed. Thread safe (one lock; the data thread and the watchdog meet only briefly).
 */
final class OpTracker {

    /** What {@link #poll} found. */
    record Verdict(boolean failed, boolean timedOut, String detail) {
        static final Verdict OK = new Verdict(false, false, "");
    }

    private static final class Entry {
        long event;
        long deadlineNanos;
        long enqueuedNanos;
        String op;
    }

    private final NcclApi api;
    private final ArrayDeque<Entry> free = new ArrayDeque<>();
    private final ArrayDeque<Entry> inFlight = new ArrayDeque<>();
    private final int[] capture = new int[1];
    private long untracked;
    private boolean closed;

    /** Creates {@code size} events on the calling thread's current device. */
    OpTracker(NcclApi api, int size) {
        this.api = api;
        long[] out = new long[1];
        for (int i = 0; i < size; i++) {
            int r = api.cudaEventCreate(out);
            if (r != NcclConstants.CUDA_SUCCESS) {
                destroyEvents();
                throw new IllegalStateException("cudaEventCreate failed: " + api.cudaGetErrorString(r) + " (" + r + ")");
            }
            Entry e = new Entry();
            e.event = out[0];
            free.add(e);
        }
    }

    /**
     * Records completion of the work enqueued so far on {@code stream} as operation {@code op}, due
     * by {@code deadlineNanos}. Streams being captured into a graph are not tracked (an event
     * recorded during capture becomes a graph node, not a completion marker).
     *
     * @return a CUDA error code from {@code cudaEventRecord}, or success
     */
    synchronized int track(String op, long stream, long nowNanos, long deadlineNanos) {
        if (closed) {
            return NcclConstants.CUDA_SUCCESS;
        }
        int r = api.cudaStreamIsCapturing(stream, capture);
        if (r != NcclConstants.CUDA_SUCCESS || capture[0] != NcclConstants.CUDA_STREAM_CAPTURE_STATUS_NONE) {
            untracked++;
            return NcclConstants.CUDA_SUCCESS;
        }
        if (free.isEmpty()) {
            retireCompleted();
        }
        Entry e = free.poll();
        if (e == null) {
            untracked++;
            return NcclConstants.CUDA_SUCCESS;
        }
        r = api.cudaEventRecord(e.event, stream);
        if (r != NcclConstants.CUDA_SUCCESS) {
            free.add(e);
            return r;
        }
        e.op = op;
        e.enqueuedNanos = nowNanos;
        e.deadlineNanos = deadlineNanos;
        inFlight.add(e);
        return NcclConstants.CUDA_SUCCESS;
    }

    /** Returns the events of the oldest operations that completed to the pool (stops at the first pending one). */
    private void retireCompleted() {
        Entry e;
        while ((e = inFlight.peek()) != null && api.cudaEventQuery(e.event) == NcclConstants.CUDA_SUCCESS) {
            inFlight.poll();
            free.add(e);
        }
    }

    /** Retires completed operations, oldest first, and reports the first one past its deadline or failed. */
    synchronized Verdict poll(long nowNanos) {
        while (!closed) {
            Entry e = inFlight.peek();
            if (e == null) {
                return Verdict.OK;
            }
            int r = api.cudaEventQuery(e.event);
            if (r == NcclConstants.CUDA_SUCCESS) {
                inFlight.poll();
                free.add(e);
                continue;
            }
            if (r == NcclConstants.CUDA_ERROR_NOT_READY) {
                if (nowNanos - e.deadlineNanos > 0) {
                    return new Verdict(false, true, e.op + " enqueued " + (nowNanos - e.enqueuedNanos) / 1_000_000
                            + " ms ago has not completed");
                }
                return Verdict.OK;
            }
            return new Verdict(true, false, "completion of " + e.op + " could not be queried: "
                    + api.cudaGetErrorString(r) + " (" + r + ")");
        }
        return Verdict.OK;
    }

    /** Operations currently tracked as in flight. */
    synchronized int inFlight() {
        return inFlight.size();
    }

    /** Operations that were not tracked (pool exhausted or stream capturing). */
    synchronized long untracked() {
        return untracked;
    }

    /** Destroys the events; call only once the communicator's work can no longer touch them. */
    synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        free.addAll(inFlight);
        inFlight.clear();
        destroyEvents();
    }

    private void destroyEvents() {
        for (Entry e : free) {
            api.cudaEventDestroy(e.event);
        }
        free.clear();
    }
}
