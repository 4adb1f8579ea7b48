package io.jcomm.kvcache;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Names KV blocks by their content, the way vLLM's prefix cache does: a prompt is cut into blocks of
 * {@link #blockTokens()} tokens, and block {@code i}'s prefix hash is
 * {@code SHA-256(prefix hash of block i-1 || n || its n token ids)}, the chain starting from a root
 * that covers the model's identity (its weights' digest, say), the block size and an optional cache
 * salt (vLLM's {@code cache_salt}: requests of different salts never share blocks). So a prefix hash
 * names every token before it, and equal prefixes of the same model name equal blocks on every host.
 *
 * <p>A block of KV bytes holds one rank's part of the cache for those tokens: its layers and KV heads
 * ({@link KvSlice}). Its name, the key of the index and of the events, is
 * {@link #blockKey}{@code (prefix hash, slice)}, another SHA-256 over the prefix hash and the slice's
 * four bounds. A partial last block (fewer than {@code blockTokens} tokens) has a prefix hash of its
 * own (the count is hashed), distinct from any full block's.
 *
 * <p>Token ids are hashed as 32-bit little-endian integers. Immutable and thread safe.
 */
public final class BlockHasher {

    private static final byte[] DOMAIN = "jcomm-kv-block-v1".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] SLICE = "slice".getBytes(StandardCharsets.US_ASCII);
    /** Longest model identity or salt, in bytes. */
    public static final int MAX_IDENTITY_BYTES = 4096;

    private final String modelIdentity;
    private final int blockTokens;
    private final String salt;
    private final BlockHash root;

    /**
     * @param modelIdentity what makes two models' KV caches interchangeable: their architecture and
     *                      weights (e.g. a name and the SHA-256 of the weights file); at most
     *                      {@value #MAX_IDENTITY_BYTES} bytes of UTF-8
     * @param blockTokens   tokens per block, 1 to 65,536
     * @param salt          a cache salt ("" for none); at most {@value #MAX_IDENTITY_BYTES} bytes
     */
    public BlockHasher(String modelIdentity, int blockTokens, String salt) {
        this.modelIdentity = Objects.requireNonNull(modelIdentity, "modelIdentity");
        this.salt = Objects.requireNonNull(salt, "salt");
        if (blockTokens < 1 || blockTokens > 1 << 16) {
            throw new IllegalArgumentException("blockTokens is 1..65536, got " + blockTokens);
        }
        this.blockTokens = blockTokens;
        byte[] id = modelIdentity.getBytes(StandardCharsets.UTF_8);
        byte[] s = salt.getBytes(StandardCharsets.UTF_8);
        if (id.length > MAX_IDENTITY_BYTES || s.length > MAX_IDENTITY_BYTES) {
            throw new IllegalArgumentException("a model identity and a salt have at most " + MAX_IDENTITY_BYTES + " bytes");
        }
        MessageDigest d = sha256();
        d.update(DOMAIN);
        putInt(d, id.length);
        d.update(id);
        putInt(d, blockTokens);
        putInt(d, s.length);
        d.update(s);
        this.root = BlockHash.wrap(d.digest());
    }

    /** {@code new BlockHasher(modelIdentity, blockTokens, "")}. */
    public BlockHasher(String modelIdentity, int blockTokens) {
        this(modelIdentity, blockTokens, "");
    }

    public String modelIdentity() {
        return modelIdentity;
    }

    public int blockTokens() {
        return blockTokens;
    }

    public String salt() {
        return salt;
    }

    /** The parent of the first block: the model, block size and salt. */
    public BlockHash root() {
        return root;
    }

    /** The prefix hash of a block of {@code tokens[from, to)} whose parent is {@code parent}. */
    public BlockHash next(BlockHash parent, int[] tokens, int from, int to) {
        if (from < 0 || to > tokens.length || to <= from || to - from > blockTokens) {
            throw new IllegalArgumentException("a block is 1.." + blockTokens + " tokens, got [" + from + ", " + to + ")");
        }
        MessageDigest d = sha256();
        d.update(parent.unsafeBytes());
        byte[] b = new byte[4 + 4 * (to - from)];
        int n = to - from;
        b[0] = (byte) n;
        b[1] = (byte) (n >>> 8);
        b[2] = (byte) (n >>> 16);
        b[3] = (byte) (n >>> 24);
        for (int i = 0; i < n; i++) {
            int t = tokens[from + i];
            int o = 4 + 4 * i;
            b[o] = (byte) t;
            b[o + 1] = (byte) (t >>> 8);
            b[o + 2] = (byte) (t >>> 16);
            b[o + 3] = (byte) (t >>> 24);
        }
        d.update(b);
        return BlockHash.wrap(d.digest());
    }

    /**
     * The prefix hashes of the blocks covering {@code tokens[0, count)}: {@code count / blockTokens} full
     * blocks, then, when {@code partialTail} and {@code count} is not a multiple of the block size, one
     * partial block of the rest.
     */
    public List<BlockHash> prefixHashes(int[] tokens, int count, boolean partialTail) {
        if (count < 0 || count > tokens.length) {
            throw new IllegalArgumentException("count " + count + " of " + tokens.length + " tokens");
        }
        List<BlockHash> out = new ArrayList<>(count / blockTokens + 1);
        BlockHash h = root;
        int full = count / blockTokens;
        for (int b = 0; b < full; b++) {
            h = next(h, tokens, b * blockTokens, (b + 1) * blockTokens);
            out.add(h);
        }
        if (partialTail && count % blockTokens != 0) {
            out.add(next(h, tokens, full * blockTokens, count));
        }
        return out;
    }

    /** The prefix hashes of the full blocks of {@code tokens} (what a prefix cache keeps, as vLLM's does). */
    public List<BlockHash> fullBlocks(int[] tokens) {
        return prefixHashes(tokens, tokens.length, false);
    }

    /** The name of the block of {@code slice} of the KV cache at the prefix {@code prefixHash}. */
    public static BlockHash blockKey(BlockHash prefixHash, KvSlice slice) {
        MessageDigest d = sha256();
        d.update(prefixHash.unsafeBytes());
        d.update(SLICE);
        putInt(d, slice.layerStart());
        putInt(d, slice.layerEnd());
        putInt(d, slice.headStart());
        putInt(d, slice.headEnd());
        return BlockHash.wrap(d.digest());
    }

    private static void putInt(MessageDigest d, int v) {
        d.update(new byte[] {(byte) v, (byte) (v >>> 8), (byte) (v >>> 16), (byte) (v >>> 24)});
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JVM has SHA-256", e);
        }
    }

    @Override
    public String toString() {
        return "BlockHasher[" + modelIdentity + ", " + blockTokens + " tokens per block" + (salt.isEmpty() ? "" : ", salted")
                + "]";
    }
}
