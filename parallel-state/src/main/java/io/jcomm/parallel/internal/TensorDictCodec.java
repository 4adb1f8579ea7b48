package io.jcomm.parallel.internal;

import io.jcomm.api.DType;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.Tensor;
import io.jcomm.runtime.Utf8;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The metadata of a tensor dict as it travels before the tensors (vLLM's
 * {@code _split_tensor_dict}): for every key in the dict's iteration order, either the tensor's
 * (device type, dtype, shape) or a plain value encoded with the group's {@link ObjectCodec}.
 *
 * <h2>Wire format (little-endian)</h2>
 * <pre>
 *   int   magic "JTD1"
 *   int   entry count (at most {@value #MAX_ENTRIES})
 *   entry*:
 *     u16   key length (1..{@value #MAX_KEY_BYTES}) + key in UTF-8
 *     byte  kind: 1 tensor, 2 value, 3 null
 *     tensor: u8 device-type length (1..32) + ASCII device type, byte dtype code, u8 rank (0..{@value #MAX_DIMS}),
 *             rank x long dims (each >= 0, element count must not overflow)
 *     value:  int length + that many codec bytes
 * </pre>
 * Decoding never trusts the bytes: every length is checked against what is left before anything
 * is allocated, and any violation is a {@link ProtocolException}. Encoding a dict that does not fit
 * these limits (or holds a value the codec cannot encode) is an {@link IllegalArgumentException}: the
 * caller's dict, nothing was sent.
 */
public final class TensorDictCodec {

    public static final int MAGIC = 0x3144544A; // "JTD1" little-endian
    public static final int MAX_ENTRIES = 1 << 16;
    public static final int MAX_KEY_BYTES = 4096;
    public static final int MAX_DIMS = 32;

    private static final byte KIND_TENSOR = 1;
    private static final byte KIND_VALUE = 2;
    private static final byte KIND_NULL = 3;
    private static final Pattern DEVICE_TYPE = Pattern.compile("[a-z][a-z0-9_]{0,31}");

    private TensorDictCodec() {
    }

    /** One key of a tensor dict: a tensor's description or a plain value. */
    public interface Entry {
        String key();
    }

    /**
     * A tensor of the dict, without its data.
     *
     * @param deviceType the device type the sender's tensor lives on ({@code cpu}, {@code cuda}, ...)
     */
    public record TensorEntry(String key, String deviceType, DType dtype, long[] shape) implements Entry {

        public TensorEntry {
            Objects.requireNonNull(key, "key");
            Objects.requireNonNull(deviceType, "deviceType");
            Objects.requireNonNull(dtype, "dtype");
            shape = shape.clone();
        }

        @Override
        public long[] shape() {
            return shape.clone();
        }

        public long numel() {
            long n = 1;
            for (long d : shape) {
                n *= d;
            }
            return n;
        }

        public boolean isHost() {
            return deviceType.equals("cpu");
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof TensorEntry && ((TensorEntry) o).key.equals(key)
                    && ((TensorEntry) o).deviceType.equals(deviceType) && ((TensorEntry) o).dtype == dtype
                    && Arrays.equals(((TensorEntry) o).shape, shape);
        }

        @Override
        public int hashCode() {
            return Objects.hash(key, deviceType, dtype, Arrays.hashCode(shape));
        }

        @Override
        public String toString() {
            return key + "=Tensor(" + deviceType + ", " + dtype.shortName() + ", " + Arrays.toString(shape) + ")";
        }
    }

    /** A plain (non-tensor) value of the dict; {@code value} may be {@code null}. */
    public record ValueEntry(String key, Object value) implements Entry {

        public ValueEntry {
            Objects.requireNonNull(key, "key");
        }
    }

    /**
     * The metadata of {@code dict}, in its iteration order; tensors are described, values encoded.
     *
     * @throws IllegalArgumentException if the dict exceeds a limit or holds a value the codec cannot encode
     */
    public static byte[] encode(Map<String, ?> dict, ObjectCodec codec) {
        Objects.requireNonNull(dict, "dict");
        if (dict.size() > MAX_ENTRIES) {
            throw new IllegalArgumentException("tensor dict has " + dict.size() + " entries; at most " + MAX_ENTRIES);
        }
        List<byte[]> parts = new ArrayList<>(dict.size() * 2);
        long total = 8;
        for (Map.Entry<String, ?> e : dict.entrySet()) {
            String key = Objects.requireNonNull(e.getKey(), "null key in tensor dict");
            byte[] k = key.getBytes(StandardCharsets.UTF_8);
            if (k.length == 0 || k.length > MAX_KEY_BYTES) {
                throw new IllegalArgumentException("tensor dict key of " + k.length + " bytes; must be 1.." + MAX_KEY_BYTES);
            }
            Object v = e.getValue();
            ByteBuffer head;
            byte[] payload = null;
            if (v instanceof Tensor) {
                Tensor t = (Tensor) v;
                byte[] dev = t.device().type().getBytes(StandardCharsets.US_ASCII);
                long[] shape = t.shape();
                if (shape.length > MAX_DIMS) {
                    throw new IllegalArgumentException("tensor '" + key + "' has " + shape.length + " dimensions; at most " + MAX_DIMS);
                }
                head = buffer(2 + k.length + 1 + 1 + dev.length + 1 + 1 + 8 * shape.length);
                head.putShort((short) k.length).put(k).put(KIND_TENSOR).put((byte) dev.length).put(dev)
                        .put(t.dtype().code()).put((byte) shape.length);
                for (long d : shape) {
                    head.putLong(d);
                }
            } else if (v == null) {
                head = buffer(2 + k.length + 1);
                head.putShort((short) k.length).put(k).put(KIND_NULL);
            } else {
                payload = codec.encode(v);
                head = buffer(2 + k.length + 1 + 4);
                head.putShort((short) k.length).put(k).put(KIND_VALUE).putInt(payload.length);
            }
            parts.add(head.array());
            total += head.capacity();
            if (payload != null) {
                parts.add(payload);
                total += payload.length;
            }
        }
        if (total > Integer.MAX_VALUE - 64) {
            throw new IllegalArgumentException("tensor dict metadata of " + total + " bytes is too large");
        }
        ByteBuffer out = buffer((int) total);
        out.putInt(MAGIC).putInt(dict.size());
        for (byte[] p : parts) {
            out.put(p);
        }
        return out.array();
    }

    private static ByteBuffer buffer(int n) {
        return ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * Decodes metadata from a peer.
     *
     * @throws ProtocolException for anything malformed: bad magic, lengths beyond the bytes, unknown
     *                           dtype or kind, negative or overflowing shapes, duplicate keys,
     *                           values the codec rejects, trailing bytes
     */
    public static List<Entry> decode(byte[] bytes, ObjectCodec codec) {
        Objects.requireNonNull(bytes, "bytes");
        ByteBuffer in = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        try {
            if (in.remaining() < 8 || in.getInt() != MAGIC) {
                throw new ProtocolException("not tensor dict metadata (bad magic)");
            }
            int count = in.getInt();
            if (count < 0 || count > MAX_ENTRIES) {
                throw new ProtocolException("tensor dict metadata announces " + count + " entries; at most " + MAX_ENTRIES);
            }
            // every entry takes at least 4 bytes: a count larger than that is a lie
            if ((long) count * 4 > in.remaining()) {
                throw new ProtocolException("tensor dict metadata announces " + count + " entries in " + in.remaining() + " bytes");
            }
            List<Entry> out = new ArrayList<>(count);
            Set<String> keys = new HashSet<>();
            for (int i = 0; i < count; i++) {
                int klen = Short.toUnsignedInt(in.getShort());
                if (klen == 0 || klen > MAX_KEY_BYTES || klen > in.remaining()) {
                    throw new ProtocolException("entry " + i + ": bad key length " + klen);
                }
                String key = utf8(in, klen, i);
                if (!keys.add(key)) {
                    throw new ProtocolException("entry " + i + ": duplicate key '" + key + "'");
                }
                byte kind = in.get();
                switch (kind) {
                    case KIND_TENSOR:
                        out.add(tensorEntry(in, key));
                        break;
                    case KIND_VALUE: {
                        int len = in.getInt();
                        if (len <= 0 || len > in.remaining()) {
                            throw new ProtocolException("entry '" + key + "': value length " + len + " with "
                                    + in.remaining() + " bytes left");
                        }
                        Object v;
                        try {
                            v = codec.decode(bytes, in.position(), len, Object.class);
                        } catch (ProtocolException e) {
                            throw new ProtocolException(e.context(), "entry '" + key + "': " + e.detail(), e);
                        }
                        in.position(in.position() + len);
                        out.add(new ValueEntry(key, v));
                        break;
                    }
                    case KIND_NULL:
                        out.add(new ValueEntry(key, null));
                        break;
                    default:
                        throw new ProtocolException("entry '" + key + "': unknown kind " + kind);
                }
            }
            if (in.hasRemaining()) {
                throw new ProtocolException(in.remaining() + " trailing bytes after the tensor dict metadata");
            }
            return List.copyOf(out);
        } catch (BufferUnderflowException e) {
            throw new ProtocolException("tensor dict metadata is truncated (" + bytes.length + " bytes)");
        }
    }

    private static TensorEntry tensorEntry(ByteBuffer in, String key) {
        int dlen = Byte.toUnsignedInt(in.get());
        if (dlen == 0 || dlen > 32 || dlen > in.remaining()) {
            throw new ProtocolException("entry '" + key + "': bad device type length " + dlen);
        }
        byte[] dev = new byte[dlen];
        in.get(dev);
        String deviceType = new String(dev, StandardCharsets.US_ASCII);
        if (!DEVICE_TYPE.matcher(deviceType).matches()) {
            throw new ProtocolException("entry '" + key + "': bad device type");
        }
        DType dtype = DType.fromCode(in.get());
        int ndim = Byte.toUnsignedInt(in.get());
        if (ndim > MAX_DIMS || 8L * ndim > in.remaining()) {
            throw new ProtocolException("entry '" + key + "': bad tensor rank " + ndim);
        }
        long[] shape = new long[ndim];
        long numel = 1;
        for (int d = 0; d < ndim; d++) {
            shape[d] = in.getLong();
            if (shape[d] < 0) {
                throw new ProtocolException("entry '" + key + "': negative dimension " + shape[d]);
            }
            try {
                numel = Math.multiplyExact(numel, shape[d]);
                Math.multiplyExact(numel, (long) dtype.byteSize());
            } catch (ArithmeticException e) {
                throw new ProtocolException("entry '" + key + "': shape " + Arrays.toString(Arrays.copyOf(shape, d + 1))
                        + " overflows");
            }
        }
        return new TensorEntry(key, deviceType, dtype, shape);
    }

    private static String utf8(ByteBuffer in, int len, int index) {
        ByteBuffer slice = in.slice().limit(len);
        in.position(in.position() + len);
        String s = Utf8.decodeStrict(slice);
        if (s == null) {
            throw new ProtocolException("entry " + index + ": key is not valid UTF-8");
        }
        return s;
    }
}
