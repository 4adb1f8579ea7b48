package io.jcomm.cpu.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.testkit.Requirements;
import java.io.IOException;
import java.nio.BufferOverflowException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.ReadOnlyBufferException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link NativeCopy}: the copy is exact whichever way it goes (native, or Java for heap buffers, small copies
 * and when not allowed), it moves positions like {@link ByteBuffer#put(ByteBuffer)} and refuses what that
 * refuses, before any native code runs.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NativeCopyTest {

    private static void requireLibrary() {
        Requirements.assume("native-copy", NativeCopy.availability().available(), NativeCopy.availability().reason());
    }

    @Test
    void loadsOnLinuxX8664WhenBuilt() {
        requireLibrary();
        assertTrue(NativeCopy.availability().reason().contains("rep movsb"), NativeCopy.availability().reason());
    }

    /**
     * Both copies, {@link NativeCopy#put} and the streaming {@link NativeCopy#stream} (non-temporal stores
     * from the destination's first 16-byte boundary, 64 bytes at a time, the head and the tail by string
     * copy): sizes of every remainder and offsets of every alignment.
     */
    @org.junit.jupiter.params.ParameterizedTest(name = "stream={0}")
    @org.junit.jupiter.params.provider.ValueSource(booleans = {false, true})
    void copiesExactlyAtEverySizeAndOffsetNativeOrNot(boolean stream) {
        Random rnd = new Random(42);
        for (boolean allow : new boolean[] {true, false}) {
            for (int round = 0; round < 400; round++) {
                int n = round < 40 ? round * 61 : rnd.nextInt(300_000);
                int srcOff = rnd.nextInt(100);
                int dstOff = rnd.nextInt(100);
                boolean directSrc = rnd.nextInt(4) != 0;
                boolean directDst = rnd.nextInt(4) != 0;
                byte[] data = new byte[n];
                rnd.nextBytes(data);
                ByteBuffer src = (directSrc ? ByteBuffer.allocateDirect(srcOff + n + 17) : ByteBuffer.allocate(srcOff + n + 17));
                src.position(srcOff);
                src.put(data);
                src.position(srcOff).limit(srcOff + n);
                ByteBuffer dst = directDst ? ByteBuffer.allocateDirect(dstOff + n + 33) : ByteBuffer.allocate(dstOff + n + 33);
                byte[] guard = new byte[dst.capacity()];
                rnd.nextBytes(guard);
                dst.put(guard).clear().position(dstOff);

                assertSame(dst, stream ? NativeCopy.stream(dst, src, allow) : NativeCopy.put(dst, src, allow));

                assertEquals(dstOff + n, dst.position(), "destination position");
                assertEquals(srcOff + n, src.position(), "source position");
                byte[] got = new byte[dst.capacity()];
                dst.clear().get(got);
                byte[] want = guard.clone();
                System.arraycopy(data, 0, want, dstOff, n);
                assertArrayEquals(want, got, "n=" + n + " srcOff=" + srcOff + " dstOff=" + dstOff + " direct=" + directSrc
                        + "/" + directDst + " native allowed=" + allow);
            }
        }
    }

    @Test
    void copiesIntoAndOutOfAMappedFile(@org.junit.jupiter.api.io.TempDir Path dir) throws IOException {
        requireLibrary();
        Path file = dir.resolve("region");
        int n = 1 << 20;
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            MappedByteBuffer region = ch.map(FileChannel.MapMode.READ_WRITE, 0, 2L * n);
            ByteBuffer src = ByteBuffer.allocateDirect(n);
            for (int i = 0; i < n; i++) {
                src.put(i, (byte) (i * 31 + 7));
            }
            NativeCopy.put(region.duplicate().position(n), src.duplicate(), true);
            ByteBuffer back = ByteBuffer.allocateDirect(n);
            NativeCopy.put(back, region.duplicate().position(n).limit(2 * n), true);
            assertEquals(src.clear(), back.clear());
            byte[] head = new byte[16];
            region.duplicate().get(head);
            assertArrayEquals(new byte[16], head, "nothing written before the destination's position");
        }
        Files.deleteIfExists(file);
    }

    @Test
    void refusesWhatPutRefusesBeforeCopying() {
        ByteBuffer src = ByteBuffer.allocateDirect(8192);
        ByteBuffer small = ByteBuffer.allocateDirect(8191);
        assertThrows(BufferOverflowException.class, () -> NativeCopy.put(small, src.duplicate(), true));
        assertEquals(0, small.position());
        ByteBuffer ro = ByteBuffer.allocateDirect(8192).asReadOnlyBuffer();
        assertThrows(ReadOnlyBufferException.class, () -> NativeCopy.put(ro, src.duplicate(), true));
        ByteBuffer limited = ByteBuffer.allocateDirect(16384).limit(4096);
        assertThrows(BufferOverflowException.class, () -> NativeCopy.put(limited, src.duplicate(), true),
                "the destination's limit bounds the copy, not its capacity");
    }
}
