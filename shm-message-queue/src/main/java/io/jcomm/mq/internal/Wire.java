package io.jcomm.mq.internal;

import io.jcomm.api.ProtocolException;
import io.jcomm.runtime.Utf8;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * The encoding of the queue's own records (its handle, its handshake steps): a kind byte, then fields
 * in a fixed order, little-endian; strings and byte arrays are an i32 length and the bytes (strings in
 * UTF-8), integer lists an i32 count and the i32 values. Reading trusts nothing: every length is checked
 * against its limit and against what is left before anything is allocated, strings must be well-formed
 * UTF-8, and a record must end exactly where its bytes do; every violation is a {@link ProtocolException}.
 */
public final class Wire {

    private Wire() {
    }

    /** A little-endian buffer of {@code size} bytes starting with {@code kind}. */
    public static ByteBuffer out(byte kind, int size) {
        return ByteBuffer.allocate(1 + size).order(ByteOrder.LITTLE_ENDIAN).put(kind);
    }

    /** The UTF-8 bytes of {@code s} (measure them, then {@link #put(ByteBuffer, byte[])}). */
    public static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    /** Writes an i32 length and {@code b}. */
    public static ByteBuffer put(ByteBuffer out, byte[] b) {
        return out.putInt(b.length).put(b);
    }

    /** Writes an i32 count and the values. */
    public static ByteBuffer put(ByteBuffer out, List<Integer> values) {
        out.putInt(values.size());
        for (int v : values) {
            out.putInt(v);
        }
        return out;
    }

    /** Bytes a list of {@code n} integers takes. */
    public static int intsSize(int n) {
        return 4 + 4 * n;
    }

    /**
     * Reads one record of {@code kind} from {@code bytes} with {@code reader}; {@code what} names it in errors.
     * The reader's own checks (a record's constructor) may throw {@link ProtocolException} too.
     */
    public static <T> T read(byte[] bytes, byte kind, String what, Function<ByteBuffer, T> reader) {
        if (bytes == null || bytes.length == 0) {
            throw new ProtocolException("empty " + what);
        }
        ByteBuffer in = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        byte k = in.get();
        if (k != kind) {
            throw new ProtocolException(what + ": record of kind " + k + ", expected " + kind);
        }
        T v;
        try {
            v = reader.apply(in);
        } catch (BufferUnderflowException e) {
            throw new ProtocolException("truncated " + what + " of " + bytes.length + " bytes");
        }
        if (in.hasRemaining()) {
            throw new ProtocolException(in.remaining() + " bytes after the " + what);
        }
        return v;
    }

    /** An i32-length-prefixed byte array of at most {@code max} bytes. */
    public static byte[] bytes(ByteBuffer in, int max, String what) {
        int len = in.getInt();
        if (len < 0 || len > max || len > in.remaining()) {
            throw new ProtocolException(what + " of " + len + " bytes (at most " + max + ", " + in.remaining() + " left)");
        }
        byte[] b = new byte[len];
        in.get(b);
        return b;
    }

    /** An i32-length-prefixed UTF-8 string of at most {@code maxBytes} bytes. */
    public static String string(ByteBuffer in, int maxBytes, String what) {
        String s = Utf8.decodeStrict(ByteBuffer.wrap(bytes(in, maxBytes, what)));
        if (s == null) {
            throw new ProtocolException("malformed UTF-8 in " + what);
        }
        return s;
    }

    /** An i32 count and at most {@code max} i32 values. */
    public static List<Integer> ints(ByteBuffer in, int max, String what) {
        int n = in.getInt();
        if (n < 0 || n > max || (long) n * 4 > in.remaining()) {
            throw new ProtocolException(what + ": " + n + " values (at most " + max + ", " + in.remaining() + " bytes left)");
        }
        List<Integer> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(in.getInt());
        }
        return out;
    }
}
