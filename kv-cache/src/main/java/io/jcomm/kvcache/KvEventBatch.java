package io.jcomm.kvcache;

import io.jcomm.api.ProtocolException;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * A batch of {@link KvEvent}s from one publisher, as it travels: its name, its host, a sequence number
 * per subscriber stream, whether it starts a snapshot (the receiver drops what it had from this
 * publisher first), and the events. A fixed little-endian layout ({@link #encode}, {@link #decode}),
 * every length bounded before anything is allocated; never Java serialization. Immutable.
 *
 * @param publisher the publisher's name (1..128 bytes)
 * @param host      its host's identity (0..256 bytes)
 * @param sequence  the batch's number in its stream to one subscriber (0, 1, ...)
 * @param snapshot  whether the batch starts a snapshot of the publisher's blocks
 * @param events    the events, in order
 */
public record KvEventBatch(String publisher, String host, long sequence, boolean snapshot, List<KvEvent> events) {

    private static final int MAGIC = 0x3145564b; // "KVE1"
    public static final int MAX_EVENTS = 4096;
    private static final int MAX_NAME = 128;
    private static final int MAX_HOST = 256;
    private static final byte STORED = 1;
    private static final byte REMOVED = 2;
    private static final byte CLEARED = 3;

    public KvEventBatch {
        Objects.requireNonNull(publisher, "publisher");
        Objects.requireNonNull(host, "host");
        events = List.copyOf(events);
        if (events.size() > MAX_EVENTS) {
            throw new IllegalArgumentException("a batch holds at most " + MAX_EVENTS + " events");
        }
    }

    /** Bytes {@code e} takes in a batch. */
    public static int encodedSize(KvEvent e) {
        if (e instanceof KvEvent.Stored s) {
            return 1 + 64 + 4 + 2 + s.location().encode().length;
        }
        if (e instanceof KvEvent.Removed r) {
            return 1 + 32 + 16 + 2 + r.instance().getBytes(StandardCharsets.UTF_8).length;
        }
        return 1;
    }

    /** Bytes of the header of a batch of this publisher and host. */
    public static int headerSize(String publisher, String host) {
        return 4 + 1 + 2 + publisher.getBytes(StandardCharsets.UTF_8).length + 2 + host.getBytes(StandardCharsets.UTF_8).length
                + 8 + 2;
    }

    public byte[] encode() {
        byte[] p = publisher.getBytes(StandardCharsets.UTF_8);
        byte[] h = host.getBytes(StandardCharsets.UTF_8);
        if (p.length < 1 || p.length > MAX_NAME || h.length > MAX_HOST) {
            throw new IllegalArgumentException("publisher names have 1.." + MAX_NAME + " bytes, hosts up to " + MAX_HOST);
        }
        int size = headerSize(publisher, host);
        for (KvEvent e : events) {
            size += encodedSize(e);
        }
        ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(MAGIC).put((byte) (snapshot ? 1 : 0)).putShort((short) p.length).put(p).putShort((short) h.length).put(h);
        b.putLong(sequence).putShort((short) events.size());
        for (KvEvent e : events) {
            if (e instanceof KvEvent.Stored s) {
                byte[] l = s.location().encode();
                b.put(STORED);
                s.prefix().copyTo(b.array(), b.position());
                b.position(b.position() + 32);
                s.parent().copyTo(b.array(), b.position());
                b.position(b.position() + 32);
                b.putShort((short) s.layers()).putShort((short) s.kvHeads()).putShort((short) l.length).put(l);
            } else if (e instanceof KvEvent.Removed r) {
                byte[] in = r.instance().getBytes(StandardCharsets.UTF_8);
                b.put(REMOVED);
                r.prefix().copyTo(b.array(), b.position());
                b.position(b.position() + 32);
                KvSlice s = r.slice();
                b.putInt(s.layerStart()).putInt(s.layerEnd()).putInt(s.headStart()).putInt(s.headEnd());
                b.putShort((short) in.length).put(in);
            } else {
                b.put(CLEARED);
            }
        }
        return b.array();
    }

    /**
     * Decodes a batch, trusting no byte.
     *
     * @throws ProtocolException when the bytes are not a valid batch
     */
    public static KvEventBatch decode(byte[] bytes) {
        try {
            ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
            if (b.getInt() != MAGIC) {
                throw new ProtocolException("not a KV event batch");
            }
            int flags = b.get();
            if ((flags & ~1) != 0) {
                throw new ProtocolException("KV event batch flags " + flags);
            }
            String publisher = string(b, 1, MAX_NAME);
            String host = string(b, 0, MAX_HOST);
            long seq = b.getLong();
            int n = b.getShort() & 0xffff;
            if (n > MAX_EVENTS || n > b.remaining()) {
                throw new ProtocolException("KV event batch of " + n + " events in " + b.remaining() + " bytes");
            }
            List<KvEvent> events = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                int type = b.get();
                switch (type) {
                    case STORED: {
                        BlockHash prefix = hash(b);
                        BlockHash parent = hash(b);
                        int layers = b.getShort() & 0xffff;
                        int heads = b.getShort() & 0xffff;
                        int len = b.getShort() & 0xffff;
                        if (len > BlockLocation.MAX_ENCODED_BYTES || len > b.remaining()) {
                            throw new ProtocolException("a stored event's location of " + len + " bytes");
                        }
                        ByteBuffer l = b.slice().order(ByteOrder.LITTLE_ENDIAN).limit(len);
                        BlockLocation loc = BlockLocation.decode(l);
                        if (l.hasRemaining()) {
                            throw new ProtocolException("a stored event's location with trailing bytes");
                        }
                        b.position(b.position() + len);
                        try {
                            events.add(new KvEvent.Stored(prefix, parent, layers, heads, loc));
                        } catch (IllegalArgumentException e) {
                            throw new ProtocolException("stored event: " + e.getMessage());
                        }
                        break;
                    }
                    case REMOVED: {
                        BlockHash prefix = hash(b);
                        KvSlice s;
                        try {
                            s = new KvSlice(b.getInt(), b.getInt(), b.getInt(), b.getInt());
                        } catch (IllegalArgumentException e) {
                            throw new ProtocolException("removed event: " + e.getMessage());
                        }
                        events.add(new KvEvent.Removed(prefix, s, string(b, 1, BlockLocation.MAX_INSTANCE_BYTES)));
                        break;
                    }
                    case CLEARED:
                        events.add(new KvEvent.Cleared());
                        break;
                    default:
                        throw new ProtocolException("KV event type " + type);
                }
            }
            if (b.hasRemaining()) {
                throw new ProtocolException("KV event batch with " + b.remaining() + " trailing bytes");
            }
            return new KvEventBatch(publisher, host, seq, flags == 1, events);
        } catch (BufferUnderflowException e) {
            throw new ProtocolException("truncated KV event batch");
        }
    }

    private static BlockHash hash(ByteBuffer b) {
        byte[] h = new byte[BlockHash.BYTES];
        b.get(h);
        return BlockHash.of(h);
    }

    private static String string(ByteBuffer b, int min, int max) {
        int len = b.getShort() & 0xffff;
        if (len < min || len > max || len > b.remaining()) {
            throw new ProtocolException("a string of " + len + " bytes in a KV event batch (" + min + ".." + max + ")");
        }
        byte[] s = new byte[len];
        b.get(s);
        return new String(s, StandardCharsets.UTF_8);
    }
}
