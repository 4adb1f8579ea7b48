package io.jcomm.cpu.internal.tcp;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;

/** File helpers for the shared-memory paths. */
final class ShmFiles {

    private static final int CHUNK = 1 << 20;

    private ShmFiles() {
    }

    /**
     * Allocates {@code [from, from + length)} of {@code fc} by writing zeros through the file (not
     * through a mapping). On a full tmpfs this fails with an {@link IOException} (ENOSPC) that the
     * caller turns into "shared memory disabled"; touching an unallocated page of a mapping would
     * instead kill the process with SIGBUS. It also pre-faults the pages off the data path.
     */
    static void allocate(FileChannel fc, long from, long length) throws IOException {
        ByteBuffer zeros = ByteBuffer.allocateDirect((int) Math.min(CHUNK, Math.max(1, length)));
        long at = from;
        long end = from + length;
        while (at < end) {
            zeros.clear();
            zeros.limit((int) Math.min(zeros.capacity(), end - at));
            while (zeros.hasRemaining()) {
                at += fc.write(zeros, at);
            }
        }
        fc.force(false);
    }
}
