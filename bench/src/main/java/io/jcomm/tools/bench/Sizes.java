package io.jcomm.tools.bench;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/** Byte sizes with K/M/G suffixes (powers of two), and nccl-tests' geometric size series. */
final class Sizes {

    private Sizes() {
    }

    static long parse(String s) {
        String t = s.trim().toUpperCase(Locale.ROOT);
        long mul = 1;
        if (t.endsWith("B")) {
            t = t.substring(0, t.length() - 1);
        }
        if (t.endsWith("K")) {
            mul = 1L << 10;
        } else if (t.endsWith("M")) {
            mul = 1L << 20;
        } else if (t.endsWith("G")) {
            mul = 1L << 30;
        }
        if (mul > 1) {
            t = t.substring(0, t.length() - 1);
        }
        try {
            long v = Long.parseLong(t) * mul;
            if (v < 0) {
                throw new IllegalArgumentException("negative size " + s);
            }
            return v;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a size: " + s + " (examples: 8, 1K, 64M)", e);
        }
    }

    /** min, min*factor, ... up to max (inclusive). */
    static List<Long> series(long min, long max, long factor) {
        if (factor < 2) {
            throw new IllegalArgumentException("factor must be >= 2");
        }
        List<Long> out = new ArrayList<>();
        for (long s = Math.max(min, 0); s <= max; s = s == 0 ? 1 : s * factor) {
            out.add(s);
            if (s > Long.MAX_VALUE / factor) {
                break;
            }
        }
        return out;
    }

    static String human(long bytes) {
        if (bytes >= (1L << 30) && bytes % (1L << 30) == 0) {
            return (bytes >> 30) + "G";
        }
        if (bytes >= (1L << 20) && bytes % (1L << 20) == 0) {
            return (bytes >> 20) + "M";
        }
        if (bytes >= (1L << 10) && bytes % (1L << 10) == 0) {
            return (bytes >> 10) + "K";
        }
        return Long.toString(bytes);
    }
}
