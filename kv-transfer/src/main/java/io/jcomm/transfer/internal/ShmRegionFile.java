package io.jcomm.transfer.internal;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.TransferRefusedException;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.file.Path;
import java.util.concurrent.locks.LockSupport;

/**
 * A shared region's file: a {@value #HEADER_BYTES}-byte header the owner keeps, then the data.
 *
 * <p>Header (native order, 8-byte aligned): magic, region id, permission bits, generation
 * ({@link #REVOKED} once deregistration began), data length, and an in-flight counter that a peer
 * copying straight into or out of the file raises for the duration of its copy. The peer raises the
 * counter first and reads the generation second; the owner revokes the generation first and waits
 * for the counter second: so either the peer sees the revocation and writes nothing, or the owner
 * waits for its copy.
 */
public final class ShmRegionFile {

    public static final int HEADER_BYTES = 4096;
    public static final long MAGIC = 0x314745524b4a434aL; // "JCJKREG1"
    public static final long REVOKED = 0;
    /** File-name prefix of an agent's directory of shared regions. */
    public static final String DIR_PREFIX = "jcomm-kv-";
    private static final int MAGIC_AT = 0;
    private static final int ID_AT = 8;
    private static final int PERMS_AT = 12;
    private static final int GENERATION_AT = 16;
    private static final int LENGTH_AT = 24;
    private static final int INFLIGHT_AT = 32;
    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());
    private static final OpContext CONTEXT = OpContext.of("transfer", -1, "shm");

    private final MappedByteBuffer map;
    private final ByteBuffer data;
    private final Path file;

    private ShmRegionFile(MappedByteBuffer map, Path file) {
        this.map = map;
        this.file = file;
        this.data = map.duplicate().position(HEADER_BYTES).slice();
    }

    /** The file name of region {@code id} of generation {@code generation}. */
    public static String fileName(int id, long generation) {
        return "r" + id + "-g" + Long.toHexString(generation);
    }

    /** Creates and maps the file of a new region, header written, data zeroed. */
    public static ShmRegionFile create(Path dir, int id, long generation, int length, int permissionBits) throws IOException {
        Path file = dir.resolve(fileName(id, generation));
        MappedByteBuffer m = ShmFiles.createMapped(file, (long) HEADER_BYTES + length, "a shared transfer region",
                "a smaller region");
        m.order(ByteOrder.nativeOrder());
        m.putInt(ID_AT, id).putInt(PERMS_AT, permissionBits).putLong(LENGTH_AT, length);
        LONGS.setVolatile(m, INFLIGHT_AT, 0L);
        LONGS.setVolatile(m, GENERATION_AT, generation);
        LONGS.setVolatile(m, MAGIC_AT, MAGIC);
        return new ShmRegionFile(m, file);
    }

    /**
     * Maps a peer's region file and checks its header against the descriptor's id.
     *
     * @throws IOException when it is not there, not ours, or has another size or header
     */
    public static ShmRegionFile attach(Path file, int id) throws IOException {
        MappedByteBuffer m = ShmFiles.mapExisting(file, true, HEADER_BYTES, HEADER_BYTES + (long) Integer.MAX_VALUE);
        m.order(ByteOrder.nativeOrder());
        if ((long) LONGS.getVolatile(m, MAGIC_AT) != MAGIC || m.getInt(ID_AT) != id
                || m.getLong(LENGTH_AT) != m.capacity() - HEADER_BYTES) {
            throw new IOException(file + " is not the shared region " + id + " it was named for");
        }
        return new ShmRegionFile(m, file);
    }

    public Path file() {
        return file;
    }

    /** The data (position 0, limit the region's length); a fresh view. */
    public ByteBuffer data() {
        return data.duplicate();
    }

    /**
     * A peer's access: raises the in-flight counter, then checks generation, permission and bounds.
     * On success the caller copies through the returned view and then calls {@link #end()}; on
     * refusal the counter is already lowered again.
     */
    public ByteBuffer begin(long generation, long offset, long length, Permission access, String owner) {
        LONGS.getAndAdd(map, INFLIGHT_AT, 1L);
        boolean ok = false;
        try {
            long g = (long) LONGS.getVolatile(map, GENERATION_AT);
            if (g != generation || g == REVOKED) {
                throw new TransferRefusedException(CONTEXT, TransferRefusedException.Reason.STALE, "region "
                        + map.getInt(ID_AT) + " of " + owner + " is at generation " + Long.toHexString(g)
                        + ", the descriptor names " + Long.toHexString(generation));
            }
            if ((map.getInt(PERMS_AT) & access.bit()) == 0) {
                throw new TransferRefusedException(CONTEXT, TransferRefusedException.Reason.PERMISSION, "region "
                        + map.getInt(ID_AT) + " of " + owner + " does not grant " + access);
            }
            long size = Math.min(map.getLong(LENGTH_AT), data.capacity());
            if (offset < 0 || length < 0 || offset > size - length) {
                throw new TransferRefusedException(CONTEXT, TransferRefusedException.Reason.OUT_OF_RANGE, "["
                        + offset + ", +" + length + ") outside region " + map.getInt(ID_AT) + " of " + owner + " (" + size + " bytes)");
            }
            ok = true;
            return data.duplicate().position((int) offset).limit((int) (offset + length));
        } finally {
            if (!ok) {
                LONGS.getAndAdd(map, INFLIGHT_AT, -1L);
            }
        }
    }

    /** Ends a successful {@link #begin}. */
    public void end() {
        LONGS.getAndAdd(map, INFLIGHT_AT, -1L);
    }

    /** The owner's revocation: refuses new peer accesses, then waits for those in flight. */
    public void revoke(Deadline deadline) {
        LONGS.setVolatile(map, GENERATION_AT, REVOKED);
        while ((long) LONGS.getVolatile(map, INFLIGHT_AT) > 0) {
            if (deadline.isExpired()) {
                throw new CommTimeoutException(CONTEXT, "shared region " + file + " still has "
                        + (long) LONGS.getVolatile(map, INFLIGHT_AT) + " peer copies in flight");
            }
            LockSupport.parkNanos(20_000);
        }
    }

    /** Removes the file (mappings stay valid until released) and releases the owner's mapping. */
    public void delete(boolean unmap) {
        ShmFiles.unlink(file);
        if (unmap) {
            ShmFiles.unmap(map);
        }
    }
}
