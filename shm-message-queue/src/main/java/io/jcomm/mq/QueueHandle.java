package io.jcomm.mq;

import io.jcomm.api.ProtocolException;
import io.jcomm.mq.internal.Wire;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Objects;

/**
 * Everything a reader needs to subscribe to a queue: what the writer broadcasts to the group after
 * creating its publications. Also usable directly (tests, launchers) with {@link QueueWriter} and
 * {@link QueueReader}: {@link #encode()} it, pass the bytes along, {@link #decode(byte[])} them.
 *
 * <p>The handle carries the queue's authentication key: treat its bytes as a secret (the CPU group
 * carries them only to the group's members). {@link #toString()} never prints the key.
 *
 * @param queueId               random id of the queue (in every control frame)
 * @param groupName             the group's name, for error messages
 * @param writerRank            the writer's rank in the group
 * @param writerHostId          the writer's host id
 * @param dataStreamId          Aeron stream id of the data stream (IPC and UDP)
 * @param controlStreamId       Aeron stream id of the readers' control streams to the writer
 * @param ipcSessionId          session id of the writer's IPC publication (0 if it has none)
 * @param udpSessionId          session id of the writer's UDP publication (0 if it has none)
 * @param udpControlEndpoint    {@code host:port} of the writer's UDP publication's control endpoint
 *                              (remote readers subscribe there), or empty
 * @param writerControlEndpoint {@code host:port} where remote readers send their control frames, or empty
 * @param udpTermLength         term length of the UDP data stream
 * @param maxMessageBytes       largest message the writer sends
 * @param authKey               32-byte HMAC key of the UDP streams (empty if no remote readers)
 * @param localReaders          ranks reading over IPC on the writer's host
 * @param remoteReaders         ranks reading over UDP
 */
public record QueueHandle(long queueId, String groupName, int writerRank, String writerHostId, int dataStreamId,
                          int controlStreamId, int ipcSessionId, int udpSessionId, String udpControlEndpoint,
                          String writerControlEndpoint, int udpTermLength, int maxMessageBytes, byte[] authKey,
                          List<Integer> localReaders, List<Integer> remoteReaders) {

    /** Upper bound of {@link #maxMessageBytes()} (1 GiB). */
    public static final int MAX_MESSAGE_LIMIT = 1 << 30;
    private static final int MAX_STRING = 512;
    /** UTF-8 bytes of the longest string field (3 per char of Java's UTF-16). */
    private static final int MAX_STRING_BYTES = 3 * MAX_STRING;
    private static final byte KIND = 'H';
    private static final int MAX_READERS = 1 << 16;

    /** Validates every field (a handle may come from another process). */
    public QueueHandle {
        Objects.requireNonNull(groupName, "groupName");
        Objects.requireNonNull(writerHostId, "writerHostId");
        udpControlEndpoint = udpControlEndpoint == null ? "" : udpControlEndpoint;
        writerControlEndpoint = writerControlEndpoint == null ? "" : writerControlEndpoint;
        authKey = authKey == null ? new byte[0] : authKey.clone();
        localReaders = List.copyOf(localReaders);
        remoteReaders = List.copyOf(remoteReaders);
        if (groupName.length() > MAX_STRING || writerHostId.length() > MAX_STRING
                || udpControlEndpoint.length() > MAX_STRING || writerControlEndpoint.length() > MAX_STRING) {
            throw new ProtocolException("queue handle: string field too long");
        }
        if (maxMessageBytes < 0 || maxMessageBytes > MAX_MESSAGE_LIMIT) {
            throw new ProtocolException("queue handle: maxMessageBytes " + maxMessageBytes + " not in [0, " + MAX_MESSAGE_LIMIT + "]");
        }
        if (authKey.length != 0 && authKey.length != 32) {
            throw new ProtocolException("queue handle: authentication key must be 32 bytes, got " + authKey.length);
        }
        if (localReaders.size() + remoteReaders.size() > MAX_READERS) {
            throw new ProtocolException("queue handle: too many readers");
        }
        if (!remoteReaders.isEmpty() && (authKey.length == 0 || udpControlEndpoint.isEmpty() || writerControlEndpoint.isEmpty())) {
            throw new ProtocolException("queue handle: remote readers need UDP endpoints and a key");
        }
        if (!localReaders.isEmpty() && ipcSessionId == 0) {
            throw new ProtocolException("queue handle: local readers need an IPC session");
        }
    }

    /** The key (a copy). */
    @Override
    public byte[] authKey() {
        return authKey.clone();
    }

    /** True if {@code rank} reads over UDP. */
    public boolean isRemote(int rank) {
        return remoteReaders.contains(rank);
    }

    /** True if {@code rank} is one of the readers. */
    public boolean isReader(int rank) {
        return localReaders.contains(rank) || remoteReaders.contains(rank);
    }

    /**
     * The handle as bytes ({@link Wire}): {@code 'H'}, then the fields in declaration order (longs and ints
     * as such, strings and the key length-prefixed, the reader lists as counts and values).
     */
    public byte[] encode() {
        byte[] group = Wire.utf8(groupName);
        byte[] host = Wire.utf8(writerHostId);
        byte[] udp = Wire.utf8(udpControlEndpoint);
        byte[] control = Wire.utf8(writerControlEndpoint);
        int size = 8 + 4 + 4 + group.length + 4 + host.length + 4 * 4 + 4 + udp.length + 4 + control.length + 4 + 4
                + 4 + authKey.length + Wire.intsSize(localReaders.size()) + Wire.intsSize(remoteReaders.size());
        ByteBuffer out = Wire.out(KIND, size).putLong(queueId);
        Wire.put(out, group).putInt(writerRank);
        Wire.put(out, host).putInt(dataStreamId).putInt(controlStreamId).putInt(ipcSessionId).putInt(udpSessionId);
        Wire.put(Wire.put(out, udp), control).putInt(udpTermLength).putInt(maxMessageBytes);
        Wire.put(Wire.put(Wire.put(out, authKey), localReaders), remoteReaders);
        return out.array();
    }

    /**
     * Decodes and validates a handle.
     *
     * @throws ProtocolException if the bytes are not a valid handle
     */
    public static QueueHandle decode(byte[] bytes) {
        return Wire.read(bytes, KIND, "queue handle", in -> new QueueHandle(in.getLong(),
                Wire.string(in, MAX_STRING_BYTES, "group name"), in.getInt(),
                Wire.string(in, MAX_STRING_BYTES, "writer host id"), in.getInt(), in.getInt(), in.getInt(), in.getInt(),
                Wire.string(in, MAX_STRING_BYTES, "UDP control endpoint"),
                Wire.string(in, MAX_STRING_BYTES, "writer control endpoint"), in.getInt(), in.getInt(),
                Wire.bytes(in, 32, "authentication key"), Wire.ints(in, MAX_READERS, "local readers"),
                Wire.ints(in, MAX_READERS, "remote readers")));
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof QueueHandle h && h.queueId == queueId && h.groupName.equals(groupName)
                && h.writerRank == writerRank && h.dataStreamId == dataStreamId && h.ipcSessionId == ipcSessionId
                && h.udpSessionId == udpSessionId && java.util.Arrays.equals(h.authKey, authKey)
                && h.localReaders.equals(localReaders) && h.remoteReaders.equals(remoteReaders)
                && h.udpControlEndpoint.equals(udpControlEndpoint) && h.writerControlEndpoint.equals(writerControlEndpoint)
                && h.controlStreamId == controlStreamId && h.maxMessageBytes == maxMessageBytes
                && h.udpTermLength == udpTermLength && h.writerHostId.equals(writerHostId);
    }

    @Override
    public int hashCode() {
        return Long.hashCode(queueId);
    }

    @Override
    public String toString() {
        return "QueueHandle{queue=" + Long.toHexString(queueId) + ", group=" + groupName + ", writer=" + writerRank
                + "@" + writerHostId + ", streams=" + dataStreamId + "/" + controlStreamId + ", ipcSession=" + ipcSessionId
                + ", udpSession=" + udpSessionId + ", udpControl=" + udpControlEndpoint + ", writerControl="
                + writerControlEndpoint + ", local=" + localReaders + ", remote=" + remoteReaders + ", max="
                + maxMessageBytes + ", key=" + (authKey.length == 0 ? "none" : "<hidden>") + "}";
    }
}
