package io.jcomm.examples.llama;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The output of {@code scripts/llama_reference.py} (torch 1.13, unsharded, float32): per request its
 * prompt, its number of new tokens, the tokens torch chose and the logits of its first steps; and the
 * smallest margin between the best and the second-best logit over every choice. {@link #compare}
 * checks a run against it.
 */
public record Reference(List<Entry> requests, double minTop2Gap) {

    /**
     * The largest difference accepted between a logit of this decoder and torch's. Both compute in
     * float32 but sum in different orders (torch's kernels block and vectorize their sums); measured
     * differences on the test model stay below 1e-4. A greedy choice is stable under such errors when
     * its margin exceeds twice the tolerance, which {@code llama_reference.py}'s output states
     * ({@link #minTop2Gap}).
     */
    public static final double LOGIT_TOLERANCE = 1e-3;

    /** Largest reference file read. */
    static final long MAX_BYTES = 256L << 20;

    /** One request of the reference. */
    public record Entry(Request request, int[] tokens, List<float[]> logits, double minTop2Gap) {
    }

    public List<Request> asRequests() {
        List<Request> out = new ArrayList<>();
        for (Entry e : requests) {
            out.add(e.request());
        }
        return out;
    }

    /** Reads a reference file. */
    public static Reference read(Path file) {
        try {
            if (Files.size(file) > MAX_BYTES) {
                throw new IllegalArgumentException(file + " is larger than " + MAX_BYTES + " bytes");
            }
            return parse(Files.readString(file, StandardCharsets.UTF_8), file.toString());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    static Reference parse(String text, String where) {
        Map<String, Object> root = Json.parseObject(text);
        List<Entry> entries = new ArrayList<>();
        for (Object o : list(root.get("requests"), where + ": requests")) {
            if (!(o instanceof Map)) {
                throw new IllegalArgumentException(where + ": a request must be an object");
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> m = (Map<String, Object>) o;
            int[] prompt = ints(m.get("prompt"), where + ": prompt");
            int[] tokens = ints(m.get("tokens"), where + ": tokens");
            int maxNew = Json.intField(m, "max_new_tokens", null, where);
            List<float[]> logits = new ArrayList<>();
            for (Object row : list(m.get("logits"), where + ": logits")) {
                List<Object> values = list(row, where + ": logits row");
                float[] f = new float[values.size()];
                for (int i = 0; i < f.length; i++) {
                    if (!(values.get(i) instanceof Number)) {
                        throw new IllegalArgumentException(where + ": a logit must be a number");
                    }
                    f[i] = ((Number) values.get(i)).floatValue();
                }
                logits.add(f);
            }
            entries.add(new Entry(new Request(prompt, maxNew), tokens, logits,
                    Json.doubleField(m, "min_top2_gap", Double.NaN, where)));
        }
        return new Reference(List.copyOf(entries), Json.doubleField(root, "min_top2_gap", Double.NaN, where));
    }

    @SuppressWarnings("unchecked")
    private static List<Object> list(Object o, String what) {
        if (!(o instanceof List)) {
            throw new IllegalArgumentException(what + " must be an array");
        }
        return (List<Object>) o;
    }

    private static int[] ints(Object o, String what) {
        List<Object> l = list(o, what);
        int[] out = new int[l.size()];
        for (int i = 0; i < out.length; i++) {
            if (!(l.get(i) instanceof Long)) {
                throw new IllegalArgumentException(what + " must hold integers");
            }
            out[i] = (int) (long) (Long) l.get(i);
        }
        return out;
    }

    /** How a run compares with the reference. */
    public record Comparison(int requests, int tokens, int mismatches, String firstMismatch, int logitRows,
                             double maxLogitDiff) {

        /** Every token equal and every compared logit within {@link #LOGIT_TOLERANCE}. */
        public boolean ok() {
            return mismatches == 0 && maxLogitDiff <= LOGIT_TOLERANCE;
        }

        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%d requests, %d tokens, %d differ%s; %d logit rows, max |diff| %.3g",
                    requests, tokens, mismatches, firstMismatch == null ? "" : " (first: " + firstMismatch + ")",
                    logitRows, maxLogitDiff);
        }
    }

    /**
     * Compares the tokens (and, where given, the logits of the first steps) of the requests in
     * {@code tokens} with this reference.
     */
    public Comparison compare(Map<Integer, int[]> tokens, Map<Integer, List<float[]>> logits) {
        int n = 0;
        int bad = 0;
        String first = null;
        int rows = 0;
        double max = 0;
        for (Map.Entry<Integer, int[]> e : tokens.entrySet()) {
            int[] want = requests.get(e.getKey()).tokens();
            int[] got = e.getValue();
            for (int i = 0; i < Math.max(want.length, got.length); i++) {
                n++;
                int w = i < want.length ? want[i] : -1;
                int g = i < got.length ? got[i] : -1;
                if (w != g) {
                    bad++;
                    if (first == null) {
                        first = "request " + e.getKey() + " step " + i + ": " + g + ", torch " + w;
                    }
                }
            }
        }
        for (Map.Entry<Integer, List<float[]>> e : logits.entrySet()) {
            List<float[]> want = requests.get(e.getKey()).logits();
            List<float[]> got = e.getValue();
            for (int s = 0; s < Math.min(want.size(), got.size()); s++) {
                float[] a = want.get(s);
                float[] b = got.get(s);
                if (a.length != b.length) {
                    throw new IllegalArgumentException("logits of " + b.length + " entries, the reference has " + a.length);
                }
                rows++;
                for (int i = 0; i < a.length; i++) {
                    max = Math.max(max, Math.abs((double) a[i] - b[i]));
                }
            }
        }
        return new Comparison(tokens.size(), n, bad, first, rows, max);
    }
}
