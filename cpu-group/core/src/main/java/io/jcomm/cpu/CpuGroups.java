package io.jcomm.cpu;

import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.codec.ForyCodec;
import io.jcomm.cpu.internal.DefaultProcessGroup;
import io.jcomm.cpu.internal.Errors;
import io.jcomm.cpu.internal.GroupShrink;
import io.jcomm.cpu.spi.CpuBackend;
import io.jcomm.cpu.spi.CpuBackendContext;
import io.jcomm.cpu.spi.CpuBackendProvider;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;

/**
 * Creates CPU groups: the control plane of one parallel dimension (barrier, CPU-tensor
 * collectives, point-to-point and object collectives), on a backend found by
 * {@link CpuBackends}.
 *
 * <pre>{@code
 * try (ProcessGroup world = CpuGroups.create(CpuGroupOptions.fromConfig(config, store))) {
 *     world.barrier();
 *     Meta m = world.broadcastObject(meta, 0, Meta.class);
 * }
 * }</pre>
 */
public final class CpuGroups {

    /**
     * Option: {@code true} (default) checks at creation that every rank registered the same classes
     * with its {@link ForyCodec} (one small all-gather); {@code false} skips the check, e.g. for a
     * group shared with processes that are not this SDK.
     */
    public static final String CODEC_CHECK_OPTION = "codec.check";

    private CpuGroups() {
    }

    /**
     * Creates and connects a group: collective over the group's members (every member calls it with
     * the same group name, size and rank list), bounded by {@link CpuGroupOptions#timeout()}. A group
     * of size 1 needs no backend and no store traffic.
     *
     * @throws io.jcomm.api.BackendException when the backend is unknown, unavailable or fails to connect
     * @throws io.jcomm.api.CommTimeoutException when the peers do not show up in time
     * @throws ProtocolException when the ranks' codecs register different classes
     */
    public static ProcessGroup create(CpuGroupOptions options) {
        return create(options, null);
    }

    /**
     * {@link #create(CpuGroupOptions)} with the backend already chosen ({@link CpuBackends#select},
     * for {@link CpuGroupOptions#backend()}): callers that create many groups resolve it once and save
     * a class-path scan per group. {@code null} selects it here.
     */
    public static ProcessGroup create(CpuGroupOptions options, CpuBackendProvider selected) {
        OpContext ctx = OpContext.of(options.groupName(), options.rank(), "create");
        Store groupStore = new PrefixStore(options.groupName(), options.store());
        if (options.size() == 1) {
            String b = options.backend().toLowerCase(Locale.ROOT);
            return connect(options, null, b.equals(CpuBackends.AUTO) ? "local" : b, groupStore, 0, options.globalRanks(), 0,
                    Deadline.after(options.timeout()), ctx, "");
        }
        CpuBackendProvider provider = selected;
        if (provider == null) {
            try {
                provider = CpuBackends.select(options.backend());
            } catch (CommException e) {
                throw Errors.sameType(e, ctx, e.detail(), e.getCause());
            }
        }
        CpuBackends.checkOptions(provider, options.options());
        java.util.Optional<String> fingerprint = options.codec().fingerprint()
                .filter(f -> Boolean.parseBoolean(options.option(CODEC_CHECK_OPTION, "true")));
        // the fingerprint travels with the members' addresses where the backend publishes them (no
        // collective, no connection at creation); a fingerprint that cannot be a tag is compared by an all-gather
        String tag = fingerprint.filter(CpuGroups::taggable).orElse("");
        DefaultProcessGroup group = connect(options, provider, provider.name(), groupStore, options.rank(),
                options.globalRanks(), 0, Deadline.after(options.timeout()), ctx, tag);
        if (fingerprint.isPresent()) {
            try {
                checkCodecs(group.backend(), options, options.codec(), fingerprint.get(), !tag.isEmpty(), ctx);
            } catch (RuntimeException e) {
                group.close();
                throw e;
            }
        }
        return group;
    }

    /**
     * Connects one member of a group of generation {@code generation} in store namespace {@code namespace}
     * with {@code options} (all but store, rank, size and global ranks), bounded by {@code deadline}: the
     * creation of every group, and of every group a {@link ProcessGroup#shrink} makes.
     */
    private static DefaultProcessGroup connect(CpuGroupOptions options, CpuBackendProvider provider, String backendName,
                                               Store namespace, int rank, List<Integer> globalRanks, int generation,
                                               Deadline deadline, OpContext ctx, String memberTag) {
        int size = globalRanks.size();
        GroupShrink.Connector successor = (ns, r, ranks, gen, d) -> connect(options, provider, backendName, ns, r, ranks,
                gen, d, OpContext.of(options.groupName(), r, "shrink"), "");
        if (size == 1) {
            return new DefaultProcessGroup(options.groupName(), 0, 1, globalRanks, backendName, options.timeout(),
                    options.codec(), options.maxObjectBytes(), null, options.fault(), generation, namespace, successor);
        }
        long left = deadline.remainingNanos();
        if (left <= 0) {
            throw new CommTimeoutException(ctx, "no time left to connect generation " + generation);
        }
        CpuBackendContext bctx = new CpuBackendContext(namespace, options.groupName(), rank, size, globalRanks,
                options.hostname(), Duration.ofNanos(left), options.options(), generation, memberTag);
        CpuBackend backend;
        try {
            backend = provider.create(bctx);
        } catch (RuntimeException e) {
            throw Errors.wrap(e, ctx);
        }
        return new DefaultProcessGroup(options.groupName(), rank, size, globalRanks, backend.name(), options.timeout(),
                options.codec(), options.maxObjectBytes(), backend, options.fault(), generation, namespace, successor);
    }

    /** Whether a codec fingerprint can travel as a {@link CpuBackendContext#memberTag()}. */
    static boolean taggable(String fingerprint) {
        return !fingerprint.isEmpty() && CpuBackendContext.isMemberTag(fingerprint);
    }

    /**
     * Fails when a member registered other classes than this rank: from the tags the backend published
     * at creation ({@code tagged}, when it did), else by an all-gather of the fingerprints.
     */
    private static void checkCodecs(CpuBackend backend, CpuGroupOptions o, ObjectCodec codec, String fingerprint,
                                    boolean tagged, OpContext ctx) {
        java.util.Optional<List<String>> tags = tagged ? backend.memberTags() : java.util.Optional.empty();
        String[] all;
        if (tags.isPresent()) {
            all = tags.get().toArray(new String[0]);
        } else {
            byte[] mine = fingerprint.getBytes(StandardCharsets.US_ASCII);
            byte[][] got;
            try {
                got = backend.allGatherBytes(mine, o.rank(), o.size(), 256, Deadline.after(o.timeout()));
            } catch (RuntimeException e) {
                throw Errors.wrap(e, ctx);
            }
            all = new String[got.length];
            for (int r = 0; r < got.length; r++) {
                all[r] = new String(got[r], StandardCharsets.US_ASCII);
            }
        }
        StringBuilder diff = new StringBuilder();
        for (int r = 0; r < all.length; r++) {
            String theirs = all[r];
            if (!theirs.equals(fingerprint)) {
                diff.append(" rank ").append(r).append('=').append(theirs);
            }
        }
        if (diff.length() > 0) {
            throw new ProtocolException(ctx, "ranks registered different classes with their codecs (this rank "
                    + fingerprint + ", registered " + codec.registeredTypeCount() + " classes;" + diff
                    + "); register the same classes everywhere");
        }
    }
}
