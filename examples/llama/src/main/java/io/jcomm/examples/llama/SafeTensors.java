package io.jcomm.examples.llama;

import io.jcomm.api.HalfFloats;
import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A reader of the safetensors format (Hugging Face's): an 8-byte little-endian header length
 * {@code n}, {@code n} bytes of UTF-8 JSON mapping each tensor name to its {@code dtype},
 * {@code shape} and {@code data_offsets} {@code [begin, end)} (relative to the data after the
 * header) plus an optional {@code "__metadata__"} map of strings, then the raw little-endian data.
 *
 * <p>Everything is checked when the file is opened, before anything is allocated from a length the
 * file states: the header length against {@link #MAX_HEADER_BYTES} and the file's size, the JSON
 * strictly ({@link Json}), every dtype, shape and offset pair (element count times element size must
 * equal the range, with overflow checks), and the tensors must tile the data section exactly (sorted
 * by offset, no overlap, no gap, ending at the file's end), as the reference implementation
 * requires. A malformed file fails with an {@link IllegalArgumentException} naming the file and the
 * fault.
 *
 * <p>Reads are positional ({@link FileChannel#read(ByteBuffer, long)}) and take a row range or a
 * block of a 2-D tensor, so that a rank reads only its shard. {@code F32}, {@code F16} and
 * {@code BF16} are widened to {@code float} (exactly); other dtypes are listed but not read.
 *
 * <p>Thread safe for reads (positional reads share no file position).
 */
public final class SafeTensors implements AutoCloseable {

    /** The reference implementation's limit on the header (100 MB). */
    public static final long MAX_HEADER_BYTES = 100_000_000L;
    /** The metadata entry of the header, not a tensor. */
    public static final String METADATA_KEY = "__metadata__";
    /** Bytes read per positional read (and the size of the read buffer). */
    private static final int CHUNK_BYTES = 1 << 20;

    /** One tensor of the file: dtype, shape and its byte range within the data section. */
    public record Entry(String name, String dtype, long[] shape, long begin, long end) {

        public Entry {
            shape = shape.clone();
        }

        @Override
        public long[] shape() {
            return shape.clone();
        }

        /** The number of elements (1 for a scalar). */
        public long numel() {
            long n = 1;
            for (long d : shape) {
                n *= d;
            }
            return n;
        }

        @Override
        public String toString() {
            return name + " " + dtype + java.util.Arrays.toString(shape);
        }
    }

    private final Path path;
    private final FileChannel channel;
    private final long dataStart;
    private final Map<String, Entry> entries;
    private final Map<String, String> metadata;

    private SafeTensors(Path path, FileChannel channel, long dataStart, Map<String, Entry> entries,
                        Map<String, String> metadata) {
        this.path = path;
        this.channel = channel;
        this.dataStart = dataStart;
        this.entries = entries;
        this.metadata = metadata;
    }

    /**
     * Opens and validates a safetensors file.
     *
     * @throws IllegalArgumentException when the file is not well-formed safetensors
     * @throws UncheckedIOException     when it cannot be read
     */
    public static SafeTensors open(Path path) {
        FileChannel ch;
        try {
            ch = FileChannel.open(path, StandardOpenOption.READ);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open " + path + ": " + e.getMessage(), e);
        }
        try {
            long size = ch.size();
            if (size < 8) {
                throw bad(path, "shorter than the 8-byte header length (" + size + " bytes)");
            }
            ByteBuffer len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);
            readFully(ch, len, 0);
            long n = len.flip().getLong();
            if (n < 2 || n > MAX_HEADER_BYTES || n > size - 8) {
                throw bad(path, "header length " + Long.toUnsignedString(n) + " is not within 2.."
                        + Math.min(MAX_HEADER_BYTES, size - 8) + " (the limit, or what the file holds after it)");
            }
            ByteBuffer hb = ByteBuffer.allocate((int) n);
            readFully(ch, hb, 8);
            String text;
            try {
                text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT).decode(hb.flip()).toString();
            } catch (CharacterCodingException e) {
                throw bad(path, "the header is not UTF-8");
            }
            if (!text.startsWith("{")) {
                throw bad(path, "the header does not start with '{'");
            }
            Map<String, Object> header;
            try {
                header = Json.parseObject(text);
            } catch (IllegalArgumentException e) {
                throw bad(path, "header: " + e.getMessage());
            }
            long dataStart = 8 + n;
            long dataLength = size - dataStart;
            Map<String, Entry> entries = new LinkedHashMap<>();
            Map<String, String> metadata = Map.of();
            for (Map.Entry<String, Object> e : header.entrySet()) {
                if (e.getKey().equals(METADATA_KEY)) {
                    metadata = metadata(path, e.getValue());
                } else {
                    entries.put(e.getKey(), entry(path, e.getKey(), e.getValue(), dataLength));
                }
            }
            checkTiling(path, entries, dataLength);
            return new SafeTensors(path, ch, dataStart, Collections.unmodifiableMap(entries), metadata);
        } catch (IOException e) {
            close(ch);
            throw new UncheckedIOException("cannot read " + path + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            close(ch);
            throw e;
        }
    }

    private static Map<String, String> metadata(Path path, Object v) {
        if (!(v instanceof Map)) {
            throw bad(path, METADATA_KEY + " must be an object, got " + Json.typeName(v));
        }
        Map<String, String> m = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
            if (!(e.getValue() instanceof String)) {
                throw bad(path, METADATA_KEY + "." + e.getKey() + " must be a string");
            }
            m.put((String) e.getKey(), (String) e.getValue());
        }
        return Collections.unmodifiableMap(m);
    }

    private static Entry entry(Path path, String name, Object v, long dataLength) {
        if (!(v instanceof Map)) {
            throw bad(path, "tensor " + name + ": expected an object, got " + Json.typeName(v));
        }
        Map<?, ?> m = (Map<?, ?>) v;
        for (Object k : m.keySet()) {
            if (!k.equals("dtype") && !k.equals("shape") && !k.equals("data_offsets")) {
                throw bad(path, "tensor " + name + ": unknown field \"" + k + "\"");
            }
        }
        if (!(m.get("dtype") instanceof String)) {
            throw bad(path, "tensor " + name + ": \"dtype\" must be a string");
        }
        String dtype = (String) m.get("dtype");
        int elementBytes = elementBytes(dtype);
        if (elementBytes <= 0) {
            throw bad(path, "tensor " + name + ": unknown dtype " + dtype);
        }
        long[] shape = longs(path, name, "shape", m.get("shape"), -1);
        long[] offsets = longs(path, name, "data_offsets", m.get("data_offsets"), 2);
        long numel = 1;
        for (long d : shape) {
            try {
                numel = Math.multiplyExact(numel, d);
            } catch (ArithmeticException e) {
                throw bad(path, "tensor " + name + ": shape " + java.util.Arrays.toString(shape) + " overflows");
            }
        }
        long begin = offsets[0];
        long end = offsets[1];
        if (begin > end || end > dataLength) {
            throw bad(path, "tensor " + name + ": data_offsets [" + begin + ", " + end + ") not within the "
                    + dataLength + " data bytes");
        }
        long bytes;
        try {
            bytes = Math.multiplyExact(numel, elementBytes);
        } catch (ArithmeticException e) {
            throw bad(path, "tensor " + name + ": shape " + java.util.Arrays.toString(shape) + " overflows");
        }
        if (bytes != end - begin) {
            throw bad(path, "tensor " + name + ": " + dtype + java.util.Arrays.toString(shape) + " needs " + bytes
                    + " bytes, data_offsets give " + (end - begin));
        }
        return new Entry(name, dtype, shape, begin, end);
    }

    private static long[] longs(Path path, String name, String field, Object v, int length) {
        if (!(v instanceof List)) {
            throw bad(path, "tensor " + name + ": \"" + field + "\" must be an array of integers");
        }
        List<?> l = (List<?>) v;
        if ((length >= 0 && l.size() != length) || l.size() > 64) {
            throw bad(path, "tensor " + name + ": \"" + field + "\" has " + l.size() + " entries");
        }
        long[] out = new long[l.size()];
        for (int k = 0; k < out.length; k++) {
            if (!(l.get(k) instanceof Long) || (Long) l.get(k) < 0) {
                throw bad(path, "tensor " + name + ": \"" + field + "\" must hold non-negative integers, got " + l.get(k));
            }
            out[k] = (Long) l.get(k);
        }
        return out;
    }

    /** The tensors must cover [0, dataLength) exactly, in offset order (empty tensors anywhere). */
    private static void checkTiling(Path path, Map<String, Entry> entries, long dataLength) {
        List<Entry> sorted = new ArrayList<>(entries.values());
        sorted.sort(Comparator.comparingLong(Entry::begin).thenComparingLong(Entry::end));
        long at = 0;
        for (Entry e : sorted) {
            if (e.begin() != at) {
                throw bad(path, "tensor " + e.name() + " starts at data offset " + e.begin() + ", expected " + at
                        + (e.begin() < at ? " (overlaps the previous tensor)" : " (a gap before it)"));
            }
            at = e.end();
        }
        if (at != dataLength) {
            throw bad(path, "the tensors end at data offset " + at + " but the file holds " + dataLength + " data bytes");
        }
    }

    /** Bytes per element of a safetensors dtype, or 0 when unknown. */
    static int elementBytes(String dtype) {
        switch (dtype) {
            case "BOOL": case "U8": case "I8": case "F8_E4M3": case "F8_E5M2":
                return 1;
            case "I16": case "U16": case "F16": case "BF16":
                return 2;
            case "I32": case "U32": case "F32":
                return 4;
            case "I64": case "U64": case "F64":
                return 8;
            default:
                return 0;
        }
    }

    // ------------------------------------------------------------------ access

    public Path path() {
        return path;
    }

    /** Tensor names, in the header's order. */
    public Set<String> names() {
        return entries.keySet();
    }

    /** The header's {@code __metadata__} (empty when absent). */
    public Map<String, String> metadata() {
        return metadata;
    }

    public boolean contains(String name) {
        return entries.containsKey(name);
    }

    /**
     * The entry of {@code name}.
     *
     * @throws IllegalArgumentException when the file has no such tensor
     */
    public Entry entry(String name) {
        Entry e = entries.get(name);
        if (e == null) {
            throw new IllegalArgumentException(path + " has no tensor " + name);
        }
        return e;
    }

    /**
     * Checks that {@code name} has shape {@code expected}.
     *
     * @throws IllegalArgumentException naming both shapes otherwise
     */
    public Entry expect(String name, long... expected) {
        Entry e = entry(name);
        if (!java.util.Arrays.equals(e.shape, expected)) {
            throw new IllegalArgumentException(path + ": " + name + " has shape " + java.util.Arrays.toString(e.shape)
                    + ", the config says " + java.util.Arrays.toString(expected));
        }
        return e;
    }

    /** All of {@code name}, widened to float. */
    public float[] read(String name) {
        Entry e = entry(name);
        if (e.numel() > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException(name + " has " + e.numel() + " elements, more than a Java array holds");
        }
        float[] out = new float[(int) e.numel()];
        readInto(e, 0, out, 0, out.length);
        return out;
    }

    /**
     * Rows {@code [row0, row0 + rows)} of a 2-D tensor, columns {@code [col0, col0 + cols)} of each,
     * widened to float, row-major ({@code rows x cols}). A column range of full width is one
     * contiguous read; a narrower one is one read per row.
     *
     * @throws IllegalArgumentException when the tensor is not 2-D or the block is not within it
     */
    public float[] readBlock(String name, long row0, int rows, long col0, int cols) {
        Entry e = entry(name);
        long[] s = e.shape;
        if (s.length != 2) {
            throw new IllegalArgumentException(name + " is not 2-D: " + java.util.Arrays.toString(s));
        }
        if (row0 < 0 || rows < 0 || row0 + rows > s[0] || col0 < 0 || cols < 0 || col0 + cols > s[1]) {
            throw new IllegalArgumentException("block rows [" + row0 + ", " + (row0 + rows) + ") x columns [" + col0 + ", "
                    + (col0 + cols) + ") is not within " + e);
        }
        long n = (long) rows * cols;
        if (n > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("a block of " + n + " elements is more than a Java array holds");
        }
        float[] out = new float[(int) n];
        if (cols == s[1]) {
            readInto(e, row0 * s[1], out, 0, (int) n);
        } else {
            for (int r = 0; r < rows; r++) {
                readInto(e, (row0 + r) * s[1] + col0, out, r * cols, cols);
            }
        }
        return out;
    }

    /** Elements {@code [first, first + count)} of {@code e} (flat index) into {@code out[at..]}. */
    private void readInto(Entry e, long first, float[] out, int at, int count) {
        int size = elementBytes(e.dtype);
        if (!e.dtype.equals("F32") && !e.dtype.equals("F16") && !e.dtype.equals("BF16")) {
            throw new IllegalArgumentException(e + ": only F32, F16 and BF16 are read as floats");
        }
        ByteBuffer buf = ByteBuffer.allocate(Math.min(CHUNK_BYTES, Math.max(size, count * size)))
                .order(ByteOrder.LITTLE_ENDIAN);
        long pos = dataStart + e.begin + first * size;
        int done = 0;
        try {
            while (done < count) {
                int n = Math.min(count - done, buf.capacity() / size);
                buf.clear().limit(n * size);
                readFully(channel, buf, pos);
                buf.flip();
                switch (e.dtype) {
                    case "F32":
                        buf.asFloatBuffer().get(out, at + done, n);
                        break;
                    case "F16":
                        for (int k = 0; k < n; k++) {
                            out[at + done + k] = HalfFloats.f16ToFloat(buf.getShort(2 * k));
                        }
                        break;
                    default: // BF16: the high half of a float
                        for (int k = 0; k < n; k++) {
                            out[at + done + k] = Float.intBitsToFloat(buf.getShort(2 * k) << 16);
                        }
                        break;
                }
                done += n;
                pos += (long) n * size;
            }
        } catch (IOException ex) {
            throw new UncheckedIOException("cannot read " + e + " from " + path + ": " + ex.getMessage(), ex);
        }
    }

    private static void readFully(FileChannel ch, ByteBuffer b, long pos) throws IOException {
        long p = pos;
        while (b.hasRemaining()) {
            int n = ch.read(b, p);
            if (n < 0) {
                throw new EOFException("end of file at " + p);
            }
            p += n;
        }
    }

    private static IllegalArgumentException bad(Path path, String what) {
        return new IllegalArgumentException("malformed safetensors file " + path + ": " + what);
    }

    private static void close(FileChannel ch) {
        try {
            ch.close();
        } catch (IOException ignored) {
            // already failing
        }
    }

    @Override
    public void close() {
        close(channel);
    }

    @Override
    public String toString() {
        return "SafeTensors[" + path + ", " + entries.size() + " tensors]";
    }
}
