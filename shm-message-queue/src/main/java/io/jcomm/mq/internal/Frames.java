package io.jcomm.mq.internal;

/**
 * Wire layout of the queue's frames (little endian). Every Aeron message of the data stream is one
 * frame: a 24-byte header and up to one chunk of a message. Messages longer than one chunk are
 * split into frames flagged {@link #BEGIN} ... {@link #END} and reassembled by the reader.
 *
 * <pre>
 * data frame (writer to readers)
 *   0  byte   type      DATA or CLOSE
 *   1  byte   flags     BEGIN | END | OBJECT | MAC
 *   2  short  version   {@value #VERSION}
 *   4  int    total     length of the whole message
 *   8  long   sequence  message number, from 1, +1 per message (CLOSE takes the next number)
 *   16 int    offset    of this chunk in the message
 *   20 int    length    of this chunk
 *   24 ...    chunk bytes
 *   [END frame with MAC flag: 32-byte HMAC-SHA256 over every frame's header and chunk]
 *
 * control frame (reader to writer)
 *   0  byte   type      HELLO, ACK or BYE
 *   1  byte   flags     MAC
 *   2  short  version
 *   4  int    rank      the reader's rank
 *   8  long   queue id
 *   16 long   a         HELLO: subscriber-position counter id (low 32 bits) and sleep-flag counter id
 *                       (high 32 bits), 0xFFFFFFFF for none; ACK/BYE: consumed sequence
 *   24 long   b         HELLO: loopback UDP port of the reader's wake-up socket (0: none);
 *                       ACK/BYE: stream position consumed
 *   32 [32-byte HMAC-SHA256 of bytes 0..32 when flagged MAC]
 * </pre>
 */
public final class Frames {

    public static final short VERSION = 1;

    public static final byte DATA = 1;
    public static final byte CLOSE = 2;
    public static final byte HELLO = 16;
    public static final byte ACK = 17;
    public static final byte BYE = 18;

    public static final int BEGIN = 1;
    public static final int END = 2;
    public static final int OBJECT = 4;
    public static final int MAC = 8;

    public static final int TYPE_OFFSET = 0;
    public static final int FLAGS_OFFSET = 1;
    public static final int VERSION_OFFSET = 2;
    public static final int TOTAL_OFFSET = 4;
    public static final int SEQ_OFFSET = 8;
    public static final int CHUNK_OFFSET_OFFSET = 16;
    public static final int CHUNK_LENGTH_OFFSET = 20;
    public static final int HEADER_LENGTH = 24;

    public static final int RANK_OFFSET = 4;
    public static final int QUEUE_ID_OFFSET = 8;
    public static final int A_OFFSET = 16;
    public static final int B_OFFSET = 24;
    public static final int CONTROL_LENGTH = 32;

    public static final int MAC_LENGTH = HmacSha256.LENGTH;

    private Frames() {
    }

    public static String typeName(int type) {
        switch (type) {
            case DATA: return "DATA";
            case CLOSE: return "CLOSE";
            case HELLO: return "HELLO";
            case ACK: return "ACK";
            case BYE: return "BYE";
            default: return "unknown(" + type + ")";
        }
    }
}
