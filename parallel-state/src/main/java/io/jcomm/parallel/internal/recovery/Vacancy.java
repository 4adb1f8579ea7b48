package io.jcomm.parallel.internal.recovery;

import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import io.jcomm.parallel.RankLayout;
import io.jcomm.parallel.internal.JobKeys;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * What the survivors of a rank loss tell the process that takes the lost rank's place
 * ({@code ParallelState.replace}): the recovery round, the state's incarnation and job nonce, the layout
 * of the current generation (TP and PP sizes and its ranks) and every rank's host id. Written once per
 * round to the store as UTF-8 text, read back with every field checked and every length bounded: the
 * bytes come from the store, not from this process.
 *
 * @param round      the recovery round the survivors are in
 * @param incarnation the state's incarnation on the store (its groups' namespaces, {@link JobKeys})
 * @param nonce      the job nonce (names of shared-memory files)
 * @param tp         tensor-parallel size
 * @param pp         pipeline-parallel size
 * @param ranks      the ranks of the current generation, ascending (the layout is laid over them)
 * @param lost       the ranks lost (one vacancy each)
 * @param hosts      every configured rank's host id, by global rank
 */
public record Vacancy(int round, long incarnation, long nonce, int tp, int pp, List<Integer> ranks, List<Integer> lost,
               List<String> hosts) {

    /** Longest record accepted. */
    static final int MAX_BYTES = 1 << 20;
    private static final String MAGIC = "jcomm-vacancy 1";

    public Vacancy {
        ranks = List.copyOf(ranks);
        lost = List.copyOf(lost);
        hosts = List.copyOf(hosts);
    }

    /** The layout of the current generation. */
    public RankLayout layout() {
        return RankLayout.over(ranks, tp, pp);
    }

    public byte[] encode() {
        StringBuilder sb = new StringBuilder(MAGIC).append('\n');
        sb.append(round).append(' ').append(incarnation).append(' ').append(Long.toHexString(nonce)).append(' ')
                .append(tp).append(' ').append(pp).append('\n');
        appendList(sb, ranks);
        appendList(sb, lost);
        for (String h : hosts) {
            sb.append(h).append('\n');
        }
        return sb.toString().getBytes(StandardCharsets.UTF_8);
    }

    private static void appendList(StringBuilder sb, List<Integer> l) {
        for (int i = 0; i < l.size(); i++) {
            sb.append(i == 0 ? "" : ",").append(l.get(i));
        }
        sb.append('\n');
    }

    private static List<Integer> ascending(String line, int worldSize, OpContext ctx) {
        List<Integer> out = new ArrayList<>();
        int previous = -1;
        for (String r : line.split(",")) {
            int v = Integer.parseInt(r);
            if (v <= previous || v >= worldSize) {
                throw new ProtocolException(ctx, "vacancy ranks not ascending below " + worldSize);
            }
            out.add(v);
            previous = v;
        }
        return out;
    }

    /**
     * @param worldSize the configured world size (every rank's host id must be there, every rank below it)
     * @throws ProtocolException naming what is wrong
     */
    public static Vacancy decode(byte[] bytes, int worldSize, OpContext ctx) {
        if (bytes == null || bytes.length > MAX_BYTES) {
            throw new ProtocolException(ctx, "vacancy record missing or longer than " + MAX_BYTES + " bytes");
        }
        String[] lines = new String(bytes, StandardCharsets.UTF_8).split("\n", -1);
        if (lines.length != 4 + worldSize + 1 || !MAGIC.equals(lines[0]) || !lines[lines.length - 1].isEmpty()) {
            throw new ProtocolException(ctx, "malformed vacancy record (" + lines.length + " lines for a world of "
                    + worldSize + ")");
        }
        try {
            String[] h = lines[1].split(" ");
            if (h.length != 5) {
                throw new ProtocolException(ctx, "malformed vacancy header");
            }
            int round = Integer.parseInt(h[0]);
            long incarnation = Long.parseLong(h[1]);
            long nonce = Long.parseUnsignedLong(h[2], 16);
            int tp = Integer.parseInt(h[3]);
            int pp = Integer.parseInt(h[4]);
            List<Integer> ranks = ascending(lines[2], worldSize, ctx);
            List<Integer> lost = ascending(lines[3], worldSize, ctx);
            if (!ranks.containsAll(lost) || round < 1 || tp < 1 || pp < 1 || ranks.size() % (tp * pp) != 0) {
                throw new ProtocolException(ctx, "vacancy round or sizes out of range");
            }
            List<String> hosts = new ArrayList<>();
            for (int i = 0; i < worldSize; i++) {
                String host = lines[4 + i];
                if (host.isEmpty() || host.length() > JobKeys.MAX_HOST_ID_BYTES) {
                    throw new ProtocolException(ctx, "vacancy host id of rank " + i + " empty or too long");
                }
                hosts.add(host);
            }
            return new Vacancy(round, incarnation, nonce, tp, pp, ranks, lost, hosts);
        } catch (NumberFormatException e) {
            throw new ProtocolException(ctx, "malformed number in a vacancy record: " + e.getMessage());
        }
    }
}
