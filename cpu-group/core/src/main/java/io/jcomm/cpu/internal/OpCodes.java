package io.jcomm.cpu.internal;

/**
 * Operation codes of the CPU collectives, as the backends put them on the wire for their mismatch
 * checks (the tcp backend's frame header, the gloo backend's argument-check descriptor). One
 * declaration: the tcp {@code Frame} uses these, and the gloo JNI glue gets them as {@code @Native}
 * constants of {@code GlooNative} (compiled into the header that {@code javac -h} writes), so Java
 * and C++ cannot drift apart. Codes are part of the wire format: never renumber.
 */
public final class OpCodes {

    public static final int NONE = 0;
    public static final int BARRIER = 1;
    public static final int BROADCAST = 2;
    public static final int ALLREDUCE = 3;
    public static final int ALLGATHER = 4;
    public static final int ALLGATHERV = 5;
    public static final int GATHER = 6;
    public static final int SCATTER = 7;
    public static final int REDUCESCATTER = 8;
    public static final int SEND = 9;
    public static final int BCAST_BYTES = 10;
    public static final int ALLGATHER_BYTES = 11;
    public static final int GATHER_BYTES = 12;
    public static final int SEND_BYTES = 13;
    public static final int MONITORED_BARRIER = 14;
    public static final int ALLTOALL = 15;
    public static final int ALLTOALLV = 16;

    private static final String[] NAMES = {"none", "barrier", "broadcast", "allReduce", "allGather", "allGatherV",
        "gather", "scatter", "reduceScatter", "send", "broadcastObject", "allGatherObject", "gatherObject",
        "sendObject", "monitoredBarrier", "allToAll", "allToAllV"};

    private OpCodes() {
    }

    /** The operation's name for messages ({@code op#N} for a code this build does not know). */
    public static String name(int code) {
        return code >= 0 && code < NAMES.length ? NAMES[code] : "op#" + code;
    }
}
