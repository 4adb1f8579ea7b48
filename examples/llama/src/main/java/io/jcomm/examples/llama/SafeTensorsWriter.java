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
import java.util.function.Supplier;

/**
 * Writes float tensors as a safetensors file ({@link SafeTensors} reads it back), in {@code F32},
 * {@code F16} or {@code BF16} (rounded to nearest even). Tensors are laid out in name order, as
 * Python's writer does; the header is padded with spaces to a multiple of 8 bytes. The file appears
 * at once (written beside it, then renamed), so that concurrent readers never see half of it.
 *
 * <p>Not thread safe; one writer per file.
 */
final class SafeTensorsWriter {

    /** A tensor to write: its shape, and where its row-major values come from when it is written. */
    private record Values(Supplier<float[]> values, long[] shape, long numel) {
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
        if (numel(shape) != values.length) {
            throw new IllegalArgumentException(name + ": " + values.length + " values for shape " + Arrays.toString(shape));
        }
        return add(name, () -> values, shape);
    }

    /**
     * Adds {@code name} with values made only when it is written (one tensor in memory at a time, for
     * models larger than the heap would hold at once); the supplier must return {@code shape}'s
     * element count.
     */
    SafeTensorsWriter add(String name, Supplier<float[]> values, long... shape) {
        if (tensors.putIfAbsent(name, new Values(values, shape.clone(), numel(shape))) != null) {
            throw new IllegalArgumentException("duplicate tensor " + name);
        }
        return this;
    }

    private static long numel(long[] shape) {
        long n = 1;
        for (long d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("negative dimension in " + Arrays.toString(shape));
            }
            n = Math.multiplyExact(n, d);
        }
        return n;
    }

    /** Writes every tensor added, replacing {@code path} atomically. */
    void write(Path path) {
        int size = SafeTensors.elementBytes(dtype);
        StringBuilder h = new StringBuilder("{\"__metadata__\":{\"format\":\"pt\"}");
        long offset = 0;
        List<Values> order = new ArrayList<>();
        for (Map.Entry<String, Values> e : tensors.entrySet()) {
            long bytes = e.getValue().numel() * size;
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
        byte[] json = h.toString().getBytes(StandardCharsets.UTF_8);
        byte[] header = Arrays.copyOf(json, (json.length + 7) / 8 * 8); // padded with spaces to 8 bytes
        Arrays.fill(header, json.length, header.length, (byte) ' ');
        Path tmp;
        try {
            tmp = Files.createTempFile(path.toAbsolutePath().getParent(), path.getFileName().toString(), ".tmp");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write beside " + path + ": " + e.getMessage(), e);
        }
        try {
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE)) {
                ByteBuffer len = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(header.length).flip();
                writeFully(ch, len);
                writeFully(ch, ByteBuffer.wrap(header));
                ByteBuffer buf = ByteBuffer.allocateDirect(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
                for (Values t : order) {
                    float[] values = t.values().get();
                    if (values.length != t.numel()) {
                        throw new IllegalStateException(values.length + " values for a tensor of " + t.numel());
                    }
                    for (float v : values) {
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
            }
            Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            deleteQuietly(tmp);
            throw new UncheckedIOException("cannot write " + path + ": " + e.getMessage(), e);
        } catch (RuntimeException e) {
            deleteQuietly(tmp);
            throw e;
        }
    }

    private static void deleteQuietly(Path p) {
        try {
            Files.deleteIfExists(p);
        } catch (IOException ignored) {
            // the write failed already; a leftover .tmp file is harmless
        }
    }

    private static void writeFully(FileChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            ch.write(b);
        }
    }
}
