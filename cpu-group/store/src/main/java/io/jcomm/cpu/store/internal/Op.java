package io.jcomm.cpu.store.internal;

/**
 * The logical commands of PyTorch's TCPStore protocol, independent of how a dialect numbers them
 * ({@link Numbering}). The wire layout of each command is its {@link Shape}.
 */
public enum Op {
    /** key, value; no reply. */
    SET(Shape.KEY_VALUE),
    /** key, expected, desired; reply: bytes. */
    COMPARE_SET(Shape.KEY_VALUE_VALUE),
    /** key; reply: bytes. */
    GET(Shape.KEY),
    /** key, i64; reply: i64. */
    ADD(Shape.KEY_I64),
    /** u64 n, n keys; reply: u8 READY/NOT_READY. */
    CHECK(Shape.KEYS),
    /** u64 n, n keys; reply: u8 STOP_WAITING once all exist. */
    WAIT(Shape.KEYS),
    /** no arguments; reply: i64. */
    GETNUMKEYS(Shape.NONE),
    /** key (torch 1.13/2.0 callback connection); reply: u8 CALLBACK_REGISTERED, later notifications. */
    WATCH_KEY(Shape.KEY),
    /** key; reply: i64 (0 or 1). */
    DELETE_KEY(Shape.KEY),
    /** key, value; no reply. */
    APPEND(Shape.KEY_VALUE),
    /** u64 n, n keys; reply: n byte strings. */
    MULTI_GET(Shape.KEYS),
    /** u64 n, n (key, value) pairs; no reply. */
    MULTI_SET(Shape.KEY_VALUE_PAIRS),
    /** no arguments; reply: u8 WAIT_CANCELED. */
    CANCEL_WAIT(Shape.NONE),
    /** u32 magic; no reply (2.2+). */
    VALIDATE(Shape.U32),
    /** u32 nonce; reply: the same u32 (2.5+). */
    PING(Shape.U32);

    private final Shape shape;

    Op(Shape shape) {
        this.shape = shape;
    }

    public Shape shape() {
        return shape;
    }

    /** Argument layouts. Every string/bytes field is a u64 little-endian length then the bytes. */
    public enum Shape {
        NONE, KEY, KEY_VALUE, KEY_VALUE_VALUE, KEY_I64, KEYS, KEY_VALUE_PAIRS, U32
    }
}
