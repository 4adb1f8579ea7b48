package io.jcomm.mq.internal;

import static io.jcomm.mq.internal.Frames.BEGIN;
import static io.jcomm.mq.internal.Frames.CHUNK_LENGTH_OFFSET;
import static io.jcomm.mq.internal.Frames.CHUNK_OFFSET_OFFSET;
import static io.jcomm.mq.internal.Frames.CLOSE;
import static io.jcomm.mq.internal.Frames.DATA;
import static io.jcomm.mq.internal.Frames.END;
import static io.jcomm.mq.internal.Frames.FLAGS_OFFSET;
import static io.jcomm.mq.internal.Frames.HEADER_LENGTH;
import static io.jcomm.mq.internal.Frames.MAC;
import static io.jcomm.mq.internal.Frames.MAC_LENGTH;
import static io.jcomm.mq.internal.Frames.OBJECT;
import static io.jcomm.mq.internal.Frames.SEQ_OFFSET;
import static io.jcomm.mq.internal.Frames.TOTAL_OFFSET;
import static io.jcomm.mq.internal.Frames.TYPE_OFFSET;
import static io.jcomm.mq.internal.Frames.VERSION;
import static io.jcomm.mq.internal.Frames.VERSION_OFFSET;
import static java.nio.ByteOrder.LITTLE_ENDIAN;

import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Reader side of the frame protocol ({@link Frames}): validates every frame before using it, checks
 * sequence numbers, bounds a message's announced size by the configured maximum <em>before</em>
 * allocating, verifies the HMAC of authenticated streams, and reassembles multi-frame messages into
 * one reusable buffer. A message that fits one frame is exposed in place (zero copy).
 *
 * <p>Any violation throws {@link ProtocolException}; after that the stream cannot be trusted and
 * the owner must stop reading it. Not thread safe. Allocation free except when the reassembly
 * buffer has to grow.
 */
public final class MessageAssembler {

    /** The frame was a non-final chunk. */
    public static final int INCOMPLETE = 0;
    /** A whole message is available: {@link #message()}. */
    public static final int MESSAGE = 1;
    /** The writer closed the queue cleanly. */
    public static final int CLOSED = 2;

    private static final int MIN_CAPACITY = 64 * 1024;

    private final OpContext context;
    private final int maxMessageBytes;
    private final HmacSha256 mac;
    private final UnsafeBuffer view = new UnsafeBuffer(0, 0);
    private byte[] array = new byte[0];

    private long expectedSeq = 1;
    private boolean inMessage;
    private long seq;
    private int total;
    private int filled;
    private int messageFlags;
    private boolean inPlace;

    /**
     * @param context         for error messages
     * @param maxMessageBytes largest message accepted
     * @param mac             verifier of authenticated streams, or {@code null} for unauthenticated
     *                        (same-host) streams
     */
    public MessageAssembler(OpContext context, int maxMessageBytes, HmacSha256 mac) {
        this.context = context;
        this.maxMessageBytes = maxMessageBytes;
        this.mac = mac;
    }

    private ProtocolException bad(String what) {
        return new ProtocolException(context, "invalid frame from the writer: " + what);
    }

    /**
     * Processes one frame.
     *
     * @return {@link #INCOMPLETE}, {@link #MESSAGE} or {@link #CLOSED}
     * @throws ProtocolException if the frame is malformed, out of order, oversized or forged
     */
    public int onFrame(DirectBuffer buffer, int offset, int length) {
        if (length < HEADER_LENGTH) {
            throw bad("frame of " + length + " bytes is shorter than the " + HEADER_LENGTH + "-byte header");
        }
        int version = buffer.getShort(offset + VERSION_OFFSET, LITTLE_ENDIAN);
        if (version != VERSION) {
            throw bad("version " + version + ", expected " + VERSION);
        }
        int type = buffer.getByte(offset + TYPE_OFFSET);
        int flags = buffer.getByte(offset + FLAGS_OFFSET) & 0xFF;
        int frameTotal = buffer.getInt(offset + TOTAL_OFFSET, LITTLE_ENDIAN);
        long frameSeq = buffer.getLong(offset + SEQ_OFFSET, LITTLE_ENDIAN);
        int chunkOffset = buffer.getInt(offset + CHUNK_OFFSET_OFFSET, LITTLE_ENDIAN);
        int chunkLength = buffer.getInt(offset + CHUNK_LENGTH_OFFSET, LITTLE_ENDIAN);
        boolean authenticated = (flags & MAC) != 0;
        if (authenticated != (mac != null)) {
            throw bad(mac != null ? "unauthenticated frame on an authenticated stream" : "unexpected MAC flag");
        }
        boolean end = (flags & END) != 0;
        int tagLength = authenticated && end ? MAC_LENGTH : 0;
        if (chunkLength < 0 || (long) HEADER_LENGTH + chunkLength + tagLength != length) {
            throw bad("chunk length " + chunkLength + " does not match the frame length " + length);
        }
        if (type == CLOSE) {
            if ((flags & (BEGIN | END)) != (BEGIN | END) || frameTotal != 0 || chunkLength != 0 || chunkOffset != 0) {
                throw bad("malformed close frame");
            }
            if (frameSeq != expectedSeq) {
                throw bad("close frame has sequence " + frameSeq + ", expected " + expectedSeq);
            }
            if (mac != null) {
                mac.reset();
                mac.update(buffer, offset, HEADER_LENGTH);
                if (!mac.verify(buffer, offset + HEADER_LENGTH)) {
                    throw bad("close frame fails authentication");
                }
            }
            inMessage = false;
            return CLOSED;
        }
        if (type != DATA) {
            throw bad("unknown frame type " + type);
        }
        if ((flags & BEGIN) != 0) {
            if (inMessage) {
                throw bad("message " + frameSeq + " started before message " + seq + " ended");
            }
            if (frameSeq != expectedSeq) {
                throw bad("message sequence " + frameSeq + " out of order, expected " + expectedSeq);
            }
            if (frameTotal < 0 || frameTotal > maxMessageBytes) {
                throw bad("message of " + frameTotal + " bytes exceeds the maximum of " + maxMessageBytes);
            }
            if (chunkOffset != 0 || chunkLength > frameTotal || (end && chunkLength != frameTotal)) {
                throw bad("first chunk [" + chunkOffset + ", +" + chunkLength + ") inconsistent with total " + frameTotal);
            }
            if (mac != null) {
                mac.reset();
                mac.update(buffer, offset, HEADER_LENGTH + chunkLength);
            }
            if (end) {
                if (mac != null && !mac.verify(buffer, offset + HEADER_LENGTH + chunkLength)) {
                    throw bad("message " + frameSeq + " fails authentication");
                }
                seq = frameSeq;
                expectedSeq = frameSeq + 1;
                messageFlags = flags;
                total = frameTotal;
                inPlace = true;
                view.wrap(buffer, offset + HEADER_LENGTH, chunkLength);
                return MESSAGE;
            }
            if (chunkLength == 0) {
                throw bad("empty non-final chunk");
            }
            ensureCapacity(frameTotal);
            buffer.getBytes(offset + HEADER_LENGTH, array, 0, chunkLength);
            inMessage = true;
            seq = frameSeq;
            total = frameTotal;
            filled = chunkLength;
            messageFlags = flags;
            return INCOMPLETE;
        }
        if (!inMessage) {
            throw bad("continuation of message " + frameSeq + " without its first chunk");
        }
        if (frameSeq != seq || frameTotal != total || chunkOffset != filled || chunkLength > total - filled
                || ((flags ^ messageFlags) & OBJECT) != 0) {
            throw bad("chunk [" + chunkOffset + ", +" + chunkLength + ") of message " + frameSeq
                    + " does not continue message " + seq + " at " + filled + " of " + total);
        }
        if (!end && chunkLength == 0) {
            throw bad("empty non-final chunk");
        }
        buffer.getBytes(offset + HEADER_LENGTH, array, filled, chunkLength);
        filled += chunkLength;
        if (mac != null) {
            mac.update(buffer, offset, HEADER_LENGTH + chunkLength);
        }
        if (!end) {
            return INCOMPLETE;
        }
        if (filled != total) {
            throw bad("message " + seq + " ended after " + filled + " of " + total + " bytes");
        }
        if (mac != null && !mac.verify(buffer, offset + HEADER_LENGTH + chunkLength)) {
            throw bad("message " + seq + " fails authentication");
        }
        inMessage = false;
        expectedSeq = seq + 1;
        inPlace = false;
        view.wrap(array, 0, total);
        return MESSAGE;
    }

    private void ensureCapacity(int needed) {
        if (array.length >= needed) {
            return;
        }
        long grown = Math.max((long) needed, Math.min((long) maxMessageBytes, Math.max(MIN_CAPACITY, 2L * array.length)));
        array = new byte[(int) grown];
    }

    /** The last complete message; valid until the next call of {@link #onFrame}. */
    public UnsafeBuffer message() {
        return view;
    }

    /** True if the last message points into the frame it came in (zero copy), not into our buffer. */
    public boolean inPlace() {
        return inPlace;
    }

    /** True if the last message was encoded by the queue's object codec. */
    public boolean isObject() {
        return (messageFlags & OBJECT) != 0;
    }

    /** Sequence number of the last complete message (0 before the first). */
    public long sequence() {
        return expectedSeq - 1;
    }

    /** True while a multi-frame message is half assembled. */
    public boolean inMessage() {
        return inMessage;
    }

    /** The reassembly array when the last message was reassembled (for decoders that need a byte[]). */
    public byte[] array() {
        return array;
    }

    /** Capacity of the reassembly buffer (for tests of its reuse). */
    public int capacity() {
        return array.length;
    }
}
