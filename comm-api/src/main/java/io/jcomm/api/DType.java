package io.jcomm.api;

import java.util.Locale;

/**
 * Element types of a {@link Tensor}. The {@link #code()} is a stable one-byte wire identifier used
 * by every protocol of this SDK; it never changes between releases.
 */
public enum DType {
    F16(2, 1, "float16", true),
    BF16(2, 2, "bfloat16", true),
    F32(4, 3, "float32", true),
    F64(8, 4, "float64", true),
    I8(1, 5, "int8", false),
    U8(1, 6, "uint8", false),
    I32(4, 7, "int32", false),
    I64(8, 8, "int64", false),
    BOOL(1, 9, "bool", false);

    private static final DType[] BY_CODE = new DType[16];

    static {
        for (DType t : values()) {
            BY_CODE[t.code] = t;
        }
    }

    private final int byteSize;
    private final byte code;
    private final String torchName;
    private final boolean floatingPoint;

    DType(int byteSize, int code, String torchName, boolean floatingPoint) {
        this.byteSize = byteSize;
        this.code = (byte) code;
        this.torchName = torchName;
        this.floatingPoint = floatingPoint;
    }

    /** Size of one element in bytes. */
    public int byteSize() {
        return byteSize;
    }

    /** Stable one-byte wire code (1..9). */
    public byte code() {
        return code;
    }

    /** PyTorch's name for this type, e.g. {@code float32}. */
    public String torchName() {
        return torchName;
    }

    /** Short lower-case name, e.g. {@code f32}. */
    public String shortName() {
        return name().toLowerCase(Locale.ROOT);
    }

    public boolean isFloatingPoint() {
        return floatingPoint;
    }

    /**
     * Decodes a wire code.
     *
     * @throws ProtocolException if the code names no type (bytes from a peer are never trusted)
     */
    public static DType fromCode(int code) {
        if (code < 0 || code >= BY_CODE.length || BY_CODE[code] == null) {
            throw new ProtocolException("unknown dtype code " + code);
        }
        return BY_CODE[code];
    }

    /**
     * Parses {@code f32}, {@code float32}, {@code float}, {@code half}, {@code bf16}, {@code i64},
     * {@code long} and the other usual spellings.
     *
     * @throws IllegalArgumentException for an unknown name
     */
    public static DType parse(String name) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        switch (n) {
            case "f16": case "float16": case "half": case "fp16": return F16;
            case "bf16": case "bfloat16": return BF16;
            case "f32": case "float32": case "float": case "fp32": return F32;
            case "f64": case "float64": case "double": case "fp64": return F64;
            case "i8": case "int8": return I8;
            case "u8": case "uint8": case "byte": return U8;
            case "i32": case "int32": case "int": return I32;
            case "i64": case "int64": case "long": return I64;
            case "bool": case "boolean": return BOOL;
            default: throw new IllegalArgumentException("unknown dtype '" + name + "'");
        }
    }
}
