package io.jcomm.tools.bench;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import org.HdrHistogram.Histogram;

/**
 * One rank's measurements as plain bytes, to gather them on rank 0 (no serialization of classes): a few
 * numbers, then compressed histograms. {@link #decode} checks every length against what arrived.
 *
 * @param values     the numbers, in the order the reader expects
 * @param histograms the histograms, in the order the reader expects
 */
public record RankMeasurements(long[] values, List<Histogram> histograms) {

    /** {@code values} (count-prefixed) and {@code histograms} (each length-prefixed, compressed). */
    public static byte[] encode(long[] values, Collection<Histogram> histograms) {
        List<byte[]> parts = new ArrayList<>(histograms.size());
        for (Histogram h : histograms) {
            ByteBuffer b = ByteBuffer.allocate(h.getNeededByteBufferCapacity());
            int n = h.encodeIntoCompressedByteBuffer(b);
            parts.add(Arrays.copyOf(b.array(), n));
        }
        int size = 4 + 8 * values.length + 4;
        for (byte[] p : parts) {
            size += 4 + p.length;
        }
        ByteBuffer out = ByteBuffer.allocate(size);
        out.putInt(values.length);
        for (long v : values) {
            out.putLong(v);
        }
        out.putInt(parts.size());
        parts.forEach(p -> out.putInt(p.length).put(p));
        return out.array();
    }

    /**
     * Reads what {@link #encode} wrote.
     *
     * @throws IllegalStateException when the bytes are truncated or a histogram does not decode
     */
    public static RankMeasurements decode(byte[] bytes) {
        ByteBuffer in = ByteBuffer.wrap(bytes);
        try {
            int nv = in.getInt();
            if (nv < 0 || nv > in.remaining() / 8) {
                throw new IllegalStateException("a rank's measurements are truncated");
            }
            long[] values = new long[nv];
            for (int i = 0; i < nv; i++) {
                values[i] = in.getLong();
            }
            int nh = in.getInt();
            if (nh < 0 || nh > in.remaining() / 4) {
                throw new IllegalStateException("a rank's measurements are truncated");
            }
            List<Histogram> hs = new ArrayList<>(nh);
            for (int k = 0; k < nh; k++) {
                int len = in.getInt();
                if (len < 0 || len > in.remaining()) {
                    throw new IllegalStateException("a rank's measurements are truncated");
                }
                byte[] part = new byte[len]; // its own array: HdrHistogram ignores a buffer's array offset
                in.get(part);
                hs.add(Histogram.decodeFromCompressedByteBuffer(ByteBuffer.wrap(part), 0));
            }
            return new RankMeasurements(values, hs);
        } catch (java.nio.BufferUnderflowException e) {
            throw new IllegalStateException("a rank's measurements are truncated", e);
        } catch (java.util.zip.DataFormatException e) {
            throw new IllegalStateException("a rank's histograms did not decode", e);
        }
    }
}
