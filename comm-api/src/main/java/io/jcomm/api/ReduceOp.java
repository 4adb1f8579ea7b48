package io.jcomm.api;

/**
 * Reduction operators for all-reduce, reduce-scatter and reduce. {@link #AVG} is computed as a sum
 * followed by a division by the group size (integer types divide with truncation toward zero).
 */
public enum ReduceOp {
    SUM(1), PROD(2), MIN(3), MAX(4), AVG(5);

    private final byte code;

    ReduceOp(int code) {
        this.code = (byte) code;
    }

    /** Stable one-byte wire code. */
    public byte code() {
        return code;
    }

    /**
     * @throws ProtocolException for an unknown code
     */
    public static ReduceOp fromCode(int code) {
        for (ReduceOp op : values()) {
            if (op.code == code) {
                return op;
            }
        }
        throw new ProtocolException("unknown reduce op code " + code);
    }
}
