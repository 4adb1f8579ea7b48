package io.jcomm.device.internal.nccl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.jcomm.api.Availability;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The availability probe: every "unavailable" reason, the version read from the file before any
 * load (an old libnccl is refused without calling the loader), and the checks after loading.
 * Library files are fakes in a temporary directory; the loader is a stub.
 */
class NcclProbeTest {

    static final String NO_DRIVER = "CUDA driver library libcuda.so.1 not found (searched -Djcomm.cuda.libdir, "
            + "LD_LIBRARY_PATH and the system library directories); is the NVIDIA driver installed?";

    @TempDir
    Path dir;

    private static final NcclProbe.BindingsLoader MUST_NOT_LOAD = (a, b, c) -> {
        fail("the bindings must not be loaded");
        return null;
    };

    private NcclProbe.Environment env(List<Path> nccl, List<Path> cuda) {
        return new NcclProbe.Environment("Linux", "amd64", nccl, cuda, List.of(), List.of(dir.resolve("no-such-dir")));
    }

    private Path lib(Path d, String name, String content) throws IOException {
        Files.createDirectories(d);
        byte[] junk = new byte[4096];
        byte[] text = content.getBytes(StandardCharsets.US_ASCII);
        byte[] all = new byte[junk.length * 2 + text.length];
        System.arraycopy(text, 0, all, junk.length, text.length);
        return Files.write(d.resolve(name), all);
    }

    /** A driver dir, a runtime dir and an NCCL dir with libnccl.so.2 embedding {@code ncclVersion}. */
    private NcclProbe.Environment installed(String ncclVersionString) throws IOException {
        Path cuda = dir.resolve("cuda");
        lib(cuda, "libcuda.so.1", "driver");
        lib(cuda, "libcudart.so.13", "runtime");
        Path nccl = dir.resolve("site-packages/nvidia/nccl/lib");
        lib(nccl, "libnccl.so.2", ncclVersionString);
        return env(List.of(nccl), List.of(cuda));
    }

    @Test
    void onThisGpuLessHostTheRealProbeNamesTheMissingDriver() {
        Assumptions.assumeFalse(Files.exists(Path.of("/dev/nvidiactl")), "this host has an NVIDIA driver");
        Assumptions.assumeTrue(LibrarySearch.find("libcuda.so.1", NcclProbe.Environment.fromSystem().systemDirs()).isEmpty(),
                "this host has libcuda.so.1");
        NcclProbe.Result r = NcclProbe.system();
        assertEquals(Availability.unavailable(NO_DRIVER), r.availability());
        assertSame(r, NcclProbe.system(), "computed once");
    }

    @Test
    void reasonsInTheOrderTheyAreChecked() throws IOException {
        assertEquals("the JavaCPP CUDA/NCCL bindings on the class path are for linux-x86_64; this is Mac OS X/aarch64",
                NcclProbe.probe(new NcclProbe.Environment("Mac OS X", "aarch64", List.of(), List.of(), List.of(), List.of()),
                        MUST_NOT_LOAD).availability().reason());
        assertEquals(NO_DRIVER, NcclProbe.probe(env(List.of(), List.of()), MUST_NOT_LOAD).availability().reason());

        Path cuda = dir.resolve("cuda");
        lib(cuda, "libcuda.so.1", "driver");
        assertEquals("CUDA runtime library libcudart.so.13 not found (searched -Djcomm.cuda.libdir, LD_LIBRARY_PATH and the "
                + "system library directories); install the CUDA 13 runtime (pip nvidia-cuda-runtime, or the CUDA toolkit) "
                + "and point -Djcomm.cuda.libdir at it",
                NcclProbe.probe(env(List.of(), List.of(cuda)), MUST_NOT_LOAD).availability().reason());

        lib(cuda, "libcudart.so.13", "runtime");
        assertEquals("libnccl.so.2 not found (searched -Djcomm.nccl.libdir, LD_LIBRARY_PATH and the system library "
                + "directories); install NCCL >= 2.14.0 (pip nvidia-nccl-cu13) and set "
                + "-Djcomm.nccl.libdir=<site-packages>/nvidia/nccl/lib",
                NcclProbe.probe(env(List.of(), List.of(cuda)), MUST_NOT_LOAD).availability().reason());

        Path nccl = dir.resolve("nccl");
        Path unversioned = lib(nccl, "libnccl.so.2", "no version here");
        assertEquals("cannot tell the NCCL version of " + unversioned + " (no version in its file name and no \"NCCL version\" "
                + "string inside); refusing to load it",
                NcclProbe.probe(env(List.of(nccl), List.of(cuda)), MUST_NOT_LOAD).availability().reason());
    }

    @Test
    void anOldLibncclIsRefusedBeforeAnythingIsLoaded() throws IOException {
        NcclProbe.Environment e = installed("NCCL version 2.13.4+cuda11.7");
        NcclProbe.Result r = NcclProbe.probe(e, MUST_NOT_LOAD);
        assertFalse(r.availability().available());
        assertEquals(21304, r.ncclVersion());
        assertEquals(e.ncclDirs().get(0).resolve("libnccl.so.2") + " is NCCL 2.13.4; jcomm needs NCCL >= 2.14.0 "
                + "(it calls functions an older library lacks, which would kill the JVM); install a newer one "
                + "(pip nvidia-nccl-cu13) and point -Djcomm.nccl.libdir at it", r.availability().reason());
    }

    @Test
    void theVersionComesFromTheRealFileNameWhenTheLinkPointsAtOne() throws IOException {
        Path nccl = dir.resolve("sys");
        Path real = lib(nccl, "libnccl.so.2.28.9", "no string inside");
        Files.createSymbolicLink(nccl.resolve("libnccl.so.2"), real.getFileName());
        assertEquals(Optional.of(22809), LibrarySearch.ncclVersion(nccl.resolve("libnccl.so.2")));
        assertEquals(Optional.of(22903), LibrarySearch.ncclVersion(lib(dir, "x.so", "NCCL version 2.29.3+cuda13.0")));
        assertEquals(Optional.of(2804), LibrarySearch.ncclVersion(lib(dir, "y.so", "NCCL version 2.8.4+cuda11.2")));
        assertEquals(Optional.empty(), LibrarySearch.ncclVersion(lib(dir, "z.so", "RCCL version : 2.29.3")));
    }

    @Test
    void aGoodLibraryIsLoadedFromExactlyTheFilesFoundThenCheckedAgain() throws IOException {
        NcclProbe.Environment e = installed("NCCL version 2.29.3+cuda13.0");
        List<Path> loaded = new ArrayList<>();
        FakeNccl fake = new FakeNccl(2, 22903, java.time.Duration.ofSeconds(5));
        NcclProbe.Result r = NcclProbe.probe(e, (cuda, cudart, nccl) -> {
            loaded.addAll(List.of(cuda, cudart, nccl));
            return fake;
        });
        assertEquals(List.of(dir.resolve("cuda/libcuda.so.1"), dir.resolve("cuda/libcudart.so.13"),
                dir.resolve("site-packages/nvidia/nccl/lib/libnccl.so.2")), loaded);
        assertTrue(r.availability().available(), r.availability().reason());
        assertEquals("NCCL 2.29.3 (" + dir.resolve("site-packages/nvidia/nccl/lib/libnccl.so.2") + "), CUDA driver API 13.0, "
                + "2 device(s)", r.availability().reason());
        assertEquals(2, r.deviceCount());
        assertSame(fake, r.api());
    }

    @Test
    void failuresAfterLoadingAreReasonsToo() throws IOException {
        NcclProbe.Environment e = installed("NCCL version 2.29.3+cuda13.0");
        NcclProbe.Result thrown = NcclProbe.probe(e, (a, b, c) -> {
            throw new UnsatisfiedLinkError("libjninccl.so: undefined symbol: ncclFoo");
        });
        assertTrue(thrown.availability().reason().startsWith("loading the CUDA/NCCL bindings failed ("), thrown.availability().reason());
        assertTrue(thrown.availability().reason().endsWith("java.lang.UnsatisfiedLinkError: libjninccl.so: undefined symbol: ncclFoo"),
                thrown.availability().reason());

        assertEquals(lib(dir.resolve("site-packages/nvidia/nccl/lib"), "libnccl.so.2", "NCCL version 2.29.3") + " is NCCL 2.12.12; "
                + "jcomm needs NCCL >= 2.14.0 (it calls functions an older library lacks, which would kill the JVM); install a "
                + "newer one (pip nvidia-nccl-cu13) and point -Djcomm.nccl.libdir at it (as loaded)",
                NcclProbe.probe(e, (a, b, c) -> new FakeNccl(1, 21212, java.time.Duration.ofSeconds(1))).availability().reason());

        assertEquals("no CUDA device is visible (check CUDA_VISIBLE_DEVICES)",
                NcclProbe.probe(e, (a, b, c) -> new FakeNccl(0, 22903, java.time.Duration.ofSeconds(1))).availability().reason());

        NcclProbe.Result noDevice = NcclProbe.probe(e, (a, b, c) -> new FakeNccl(1, 22903, java.time.Duration.ofSeconds(1)) {
            @Override
            public int cudaGetDeviceCount(int[] out) {
                return NcclConstants.CUDA_ERROR_NO_DEVICE;
            }

            @Override
            public String cudaGetErrorString(int error) {
                return "no CUDA-capable device is detected";
            }
        });
        assertEquals("CUDA reports no usable device: no CUDA-capable device is detected (cudaError 100)",
                noDevice.availability().reason());
    }

    @Test
    void systemDirectoriesComeFromLdSoConf() {
        List<Path> dirs = LibrarySearch.systemDirs();
        assertTrue(dirs.contains(Path.of("/usr/lib/x86_64-linux-gnu")), dirs.toString());
        assertNotNull(LibrarySearch.splitPath(":/a::/b:"));
        assertEquals(List.of(Path.of("/a"), Path.of("/b")), LibrarySearch.splitPath(":/a::/b:"));
    }
}
