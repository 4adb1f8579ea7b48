package io.jcomm.examples.llama;

import io.jcomm.api.HalfFloats;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Writes float tensors as a safetensors file ({@link SafeTensors} reads it back), in {@code F32},
 * {@code F16} or {@code BF16} (rounded to nearest even). Tensors are laid out in name order, as
 * Python's writer does; the header is padded with spaces to a multiple of 8 bytes. The file appears
 * at once (written beside it, then renamed), so that concurrent readers never see half of it.
 *
 * <p>Not thread safe; one writer per file.
 */
final class SafeTensorsWriter {

    /** A tensor to write: row-major values and their shape. */
    record Values(float[] values, long[] shape) {
    }

    private final Map<String, Values> tensors = new TreeMap<>();
    private final String dtype;

    /** @param dtype {@code F32}, {@code F16} or {@code BF16} */
    SafeTensorsWriter(String dtype) {
        if (!dtype.equals("F32") && !dtype.equals("F16") && !dtype.equals("BF16")) {
            throw new IllegalArgumentException("dtype is F32, F16 or BF16, not " + dtype);
        }
        this.dtype = dtype;
    }

    /** Adds {@code name}; its element count must match {@code shape}. */
    SafeTensorsWriter add(String name, float[] values, long... shape) {
        long n = 1;
        for (long d : shape) {
            n = Math.multiplyExact(n, d);
        }
        if (n != values.length) {
            throw new IllegalArgumentException(name + ": " + values.length + " values for shape " + Arrays.toString(shape));
        }
        if (tensors.putIfAbsent(name, new Values(values, shape.clone())) != null) {
            throw new IllegalArgumentException("duplicate tensor " + name);
        }
        return this;
    }

    /** Writes every tensor added, replacing {@code path} atomically. */
    void write(Path path) {
        int size = SafeTensors.elementBytes(dtype);
        StringBuilder h = new StringBuilder("{\"__metadata__\":{\"format\":\"pt\"}");
        long offset = 0;
        List<Values> order = new ArrayList<>();
        for (Map.Entry<String, Values> e : tensors.entrySet()) {
            long bytes = (long) e.getValue().values().length * size;
            h.append(',').append(Json.quote(e.getKey())).append(":{\"dtype\":\"").append(dtype).append("\",\"shape\":[");
            long[] shape = e.getValue().shape();
            for (int k = 0; k < shape.length; k++) {
                h.append(k == 0 ? "" : ",").append(shape[k]);
            }
            h.append("],\"data_offsets\":[").append(offset).append(',').append(offset + bytes).append("]}");
            offset += bytes;
            order.add(e.getValue());
        }
        h.append('}');
        while ((h.length() % 8) != 0) {
            h.append(' ');
        }
        byte[] header = h.toString().getBytes(StandardCharsets.UTF_8);
        Path tmp = path.resolveSibling(path.getFileName() + ".tmp" + ProcessHandle.current().pid());
        try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
                StandardOpenOption.WRITE)) {
            ByteBuffer len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(header.length).flip();
            writeFully(ch, len);
            writeFully(ch, ByteBuffer.wrap(header));
            ByteBuffer buf = ByteBuffer.allocateDirect(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
            for (Values t : order) {
                for (float v : t.values()) {
                    if (buf.remaining() < 4) {
                        writeFully(ch, buf.flip());
                        buf.clear();
                    }
                    switch (dtype) {
                        case "F32":
                            buf.putFloat(v);
                            break;
                        case "F16":
                            buf.putShort(HalfFloats.floatToF16(v));
                            break;
                        default:
                            buf.putShort(HalfFloats.floatToBf16(v));
                            break;
                    }
                }
            }
            writeFully(ch, buf.flip());
            ch.force(false);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + tmp + ": " + e.getMessage(), e);
        }
        try {
            Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot rename " + tmp + " to " + path + ": " + e.getMessage(), e);
        }
    }

    private static void writeFully(FileChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            ch.write(b);
        }
    }
}
