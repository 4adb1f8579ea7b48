package io.jcomm.kvcache;

import io.jcomm.transfer.MemoryKind;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.Optional;
import java.util.Set;

/**
 * A process of the index tests (started through the testkit's {@code WorkerMain}):
 * <ul>
 *   <li>{@code write FILE TAG FROM TO BOUND HOLD}: publishes keys {@code TAG:i} owned by itself, prints
 *       {@code written TAG N evicted E size S}, then with {@code HOLD=1} stays alive (up to 120 s) until killed;</li>
 *   <li>{@code read FILE TAGS FROM TO SECONDS}: looks the keys of every tag up until it has seen them
 *       all (or the time is up), checking each hit's content; prints {@code read hits H of T bad B};</li>
 *   <li>{@code count FILE TAG FROM TO}: prints {@code found N size S}.</li>
 * </ul>
 */
public final class IndexWorker {

    private IndexWorker() {
    }

    static BlockHash key(String tag, int i) {
        try {
            return BlockHash.of(MessageDigest.getInstance("SHA-256").digest((tag + ":" + i).getBytes(StandardCharsets.UTF_8)));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    static BlockLocation location(String tag, int i, BlockOwner owner) {
        RemoteDescriptor d = new RemoteDescriptor("agent-" + tag, 1, 7, MemoryKind.SHARED, 4096L * i, 4096, Set.of(Permission.READ));
        return new BlockLocation(tag, d, new KvSlice(0, 8, 0, 2), 16, new int[] {i, -i}, owner, 1_000_000L + i);
    }

    /** Whether {@code l} is what {@link #location} made for {@code tag} and {@code i} (any owner). */
    static boolean matches(BlockLocation l, String tag, int i) {
        return l.instance().equals(tag) && l.where().offset() == 4096L * i && l.headChecksum(0) == i && l.headChecksum(1) == -i
                && l.storedAtMicros() == 1_000_000L + i && l.where().agent().equals("agent-" + tag);
    }

    static IndexOptions options(String file, long bound) {
        return IndexOptions.builder(Path.of(file)).maxEntries(bound).sweepInterval(Duration.ZERO).build();
    }

    public static void main(String[] a) throws Exception {
        switch (a[0]) {
            case "write": {
                int from = Integer.parseInt(a[3]);
                int to = Integer.parseInt(a[4]);
                try (HostBlockIndex idx = HostBlockIndex.open(options(a[1], Long.parseLong(a[5])))) {
                    BlockOwner me = BlockOwner.self();
                    for (int i = from; i < to; i++) {
                        if (!idx.publish(key(a[2], i), location(a[2], i, me))) {
                            throw new IllegalStateException("publish " + i + " refused");
                        }
                    }
                    System.out.println("written " + a[2] + " " + (to - from) + " evicted " + idx.stats().evicted() + " size "
                            + idx.size());
                    System.out.flush();
                    if (a[6].equals("1")) {
                        Thread.sleep(120_000);
                    }
                }
                break;
            }
            case "read": {
                String[] tags = a[2].split(",");
                int from = Integer.parseInt(a[3]);
                int to = Integer.parseInt(a[4]);
                long end = System.nanoTime() + Duration.ofSeconds(Long.parseLong(a[5])).toNanos();
                try (HostBlockIndex idx = HostBlockIndex.open(options(a[1], 1 << 16))) {
                    boolean[][] seen = new boolean[tags.length][to - from];
                    int hits = 0;
                    int bad = 0;
                    int total = tags.length * (to - from);
                    while (hits < total && System.nanoTime() < end) {
                        for (int t = 0; t < tags.length; t++) {
                            for (int i = from; i < to; i++) {
                                Optional<BlockLocation> l = idx.lookup(key(tags[t], i));
                                if (l.isPresent()) {
                                    if (!matches(l.get(), tags[t], i)) {
                                        bad++;
                                    } else if (!seen[t][i - from]) {
                                        seen[t][i - from] = true;
                                        hits++;
                                    }
                                }
                            }
                        }
                    }
                    System.out.println("read hits " + hits + " of " + total + " bad " + bad);
                }
                break;
            }
            case "count": {
                int from = Integer.parseInt(a[3]);
                int to = Integer.parseInt(a[4]);
                try (HostBlockIndex idx = HostBlockIndex.open(options(a[1], 1 << 16))) {
                    int n = 0;
                    for (int i = from; i < to; i++) {
                        Optional<BlockLocation> l = idx.lookup(key(a[2], i));
                        if (l.isPresent() && matches(l.get(), a[2], i)) {
                            n++;
                        }
                    }
                    System.out.println("found " + n + " size " + idx.size());
                }
                break;
            }
            default:
                throw new IllegalArgumentException(a[0]);
        }
    }
}
