package io.jcomm.device.internal.nccl;

import io.jcomm.api.config.Settings;
import io.jcomm.api.Availability;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;

/**
 * Decides whether the NCCL provider can run in this process, with a reason, in an order that never
 * crashes the JVM and never breaks a class:
 *
 * <ol>
 *   <li>platform is linux-x86_64 (the only JavaCPP natives on the class path);</li>
 *   <li>the CUDA driver {@code libcuda.so.1}, the CUDA runtime {@code libcudart.so.13} and
 *       {@code libnccl.so.2} exist (file checks in the configured directories,
 *       {@code LD_LIBRARY_PATH} and the system library directories; nothing is loaded);</li>
 *   <li>libnccl's version, read from the file, is at least {@link NcclConstants#MIN_VERSION_CODE}
 *       (an older library would load, and the first call to a symbol it lacks would kill the
 *       JVM);</li>
 *   <li>only then the exact files found are loaded and the JavaCPP bindings initialised; the
 *       loaded library's {@code ncclGetVersion} is checked again;</li>
 *   <li>{@code cudaGetDeviceCount} reports at least one device.</li>
 * </ol>
 *
 * <p>{@link #system()} runs this once per JVM and caches the verdict: loading native libraries is
 * process-wide state, so this is the one deliberate JVM-global of the module (immutable once made).
 */
public final class NcclProbe {

    /** System property: directories (colon-separated) holding libnccl.so.2, e.g. a pip {@code nvidia/nccl/lib}. */
    private static final String NCCL_LIBDIR_PROP = Settings.NCCL_LIBDIR.name();
    /** System property: directories holding libcudart.so.13 (and libcuda.so.1 if not in a system directory). */
    private static final String CUDA_LIBDIR_PROP = Settings.CUDA_LIBDIR.name();

    public static final String LIBCUDA = "libcuda.so.1";
    public static final String LIBCUDART = "libcudart.so.13";
    public static final String LIBNCCL = "libnccl.so.2";

    /** Loads the three libraries (in order) and the bindings; throws on failure. */
    @FunctionalInterface
    public interface BindingsLoader {
        NcclApi load(Path libcuda, Path libcudart, Path libnccl) throws Exception;
    }

    /**
     * Where the probe looks, read once from the process environment.
     *
     * @param osName        {@code os.name}
     * @param osArch        {@code os.arch}
     * @param ncclDirs      from {@link #NCCL_LIBDIR_PROP}
     * @param cudaDirs      from {@link #CUDA_LIBDIR_PROP}
     * @param ldLibraryPath from {@code LD_LIBRARY_PATH}
     * @param systemDirs    the dynamic linker's directories
     */
    public record Environment(String osName, String osArch, List<Path> ncclDirs, List<Path> cudaDirs,
                              List<Path> ldLibraryPath, List<Path> systemDirs) {

        public Environment {
            ncclDirs = List.copyOf(ncclDirs);
            cudaDirs = List.copyOf(cudaDirs);
            ldLibraryPath = List.copyOf(ldLibraryPath);
            systemDirs = List.copyOf(systemDirs);
        }

        /** This process's environment. */
        public static Environment fromSystem() {
            return new Environment(System.getProperty("os.name", "?"), System.getProperty("os.arch", "?"),
                    LibrarySearch.splitPath(Settings.NCCL_LIBDIR.fromProcess().orElse(null)),
                    LibrarySearch.splitPath(Settings.CUDA_LIBDIR.fromProcess().orElse(null)),
                    LibrarySearch.splitPath(System.getenv("LD_LIBRARY_PATH")),
                    LibrarySearch.systemDirs());
        }
    }

    /**
     * The probe's verdict.
     *
     * @param availability available, or not with the reason
     * @param ncclVersion  the NCCL version code (0 when unknown)
     * @param deviceCount  CUDA devices visible (0 when unknown)
     * @param api          the loaded bindings when available, else {@code null}
     */
    public record Result(Availability availability, Path libnccl, int ncclVersion, int deviceCount, NcclApi api) {
        public Result {
            Objects.requireNonNull(availability, "availability");
        }

        static Result unavailable(String reason) {
            return new Result(Availability.unavailable(reason), null, 0, 0, null);
        }
    }

    private NcclProbe() {
    }

    private static final class Holder {
        static final Result SYSTEM = probe(Environment.fromSystem(), JavaCppNcclApi::load);
    }

    /** The verdict for this process, computed on first use and cached. Never throws. */
    public static Result system() {
        return Holder.SYSTEM;
    }

    /** Runs the probe against {@code env}, loading with {@code loader} only when every file check passed. Never throws. */
    public static Result probe(Environment env, BindingsLoader loader) {
        try {
            return probe0(env, loader);
        } catch (RuntimeException | LinkageError e) {
            return Result.unavailable("NCCL probe failed: " + e);
        }
    }

    private static Result probe0(Environment env, BindingsLoader loader) {
        String os = env.osName().toLowerCase(Locale.ROOT);
        String arch = env.osArch().toLowerCase(Locale.ROOT);
        if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            return Result.unavailable("the JavaCPP CUDA/NCCL bindings on the class path are for linux-x86_64; this is "
                    + env.osName() + "/" + env.osArch());
        }
        Optional<Path> cuda = LibrarySearch.find(LIBCUDA, concat(env.cudaDirs(), env.ldLibraryPath(), env.systemDirs()));
        if (cuda.isEmpty()) {
            return Result.unavailable("CUDA driver library " + LIBCUDA + " not found (searched -D" + CUDA_LIBDIR_PROP
                    + ", LD_LIBRARY_PATH and the system library directories); is the NVIDIA driver installed?");
        }
        Optional<Path> cudart = LibrarySearch.find(LIBCUDART,
                concat(env.cudaDirs(), env.ncclDirs(), env.ldLibraryPath(), env.systemDirs()));
        if (cudart.isEmpty()) {
            return Result.unavailable("CUDA runtime library " + LIBCUDART + " not found (searched -D" + CUDA_LIBDIR_PROP
                    + ", LD_LIBRARY_PATH and the system library directories); install the CUDA 13 runtime "
                    + "(pip nvidia-cuda-runtime, or the CUDA toolkit) and point -D" + CUDA_LIBDIR_PROP + " at it");
        }
        Optional<Path> nccl = LibrarySearch.find(LIBNCCL, concat(env.ncclDirs(), env.ldLibraryPath(), env.systemDirs()));
        if (nccl.isEmpty()) {
            return Result.unavailable(LIBNCCL + " not found (searched -D" + NCCL_LIBDIR_PROP
                    + ", LD_LIBRARY_PATH and the system library directories); install NCCL >= "
                    + NcclConstants.versionString(NcclConstants.MIN_VERSION_CODE) + " (pip nvidia-nccl-cu13) and set -D"
                    + NCCL_LIBDIR_PROP + "=<site-packages>/nvidia/nccl/lib");
        }
        Path lib = nccl.get();
        Optional<Integer> fileVersion = LibrarySearch.ncclVersion(lib);
        if (fileVersion.isEmpty()) {
            return Result.unavailable("cannot tell the NCCL version of " + lib + " (no version in its file name and no "
                    + "\"NCCL version\" string inside); refusing to load it");
        }
        String tooOld = checkVersion(lib, fileVersion.get());
        if (tooOld != null) {
            return new Result(Availability.unavailable(tooOld), lib, fileVersion.get(), 0, null);
        }
        NcclApi api;
        try {
            api = loader.load(cuda.get(), cudart.get(), lib);
        } catch (Exception | LinkageError e) {
            return new Result(Availability.unavailable("loading the CUDA/NCCL bindings failed (" + cuda.get() + ", "
                    + cudart.get() + ", " + lib + "): " + e), lib, fileVersion.get(), 0, null);
        }
        int[] out = new int[1];
        int r = api.getVersion(out);
        if (r != NcclConstants.SUCCESS) {
            return new Result(Availability.unavailable("ncclGetVersion failed: " + api.getErrorString(r)), lib,
                    fileVersion.get(), 0, null);
        }
        int loaded = out[0];
        tooOld = checkVersion(lib, loaded);
        if (tooOld != null) {
            return new Result(Availability.unavailable(tooOld + " (as loaded)"), lib, loaded, 0, null);
        }
        r = api.cudaGetDeviceCount(out);
        if (r != NcclConstants.CUDA_SUCCESS) {
            return new Result(Availability.unavailable("CUDA reports no usable device: " + api.cudaGetErrorString(r)
                    + " (cudaError " + r + ")"), lib, loaded, 0, null);
        }
        int devices = out[0];
        if (devices < 1) {
            return new Result(Availability.unavailable("no CUDA device is visible (check CUDA_VISIBLE_DEVICES)"), lib,
                    loaded, 0, null);
        }
        String driver = api.cudaDriverGetVersion(out) == NcclConstants.CUDA_SUCCESS
                ? (out[0] / 1000) + "." + (out[0] % 1000) / 10 : "?";
        return new Result(Availability.available("NCCL " + NcclConstants.versionString(loaded) + " (" + lib
                + "), CUDA driver API " + driver + ", " + devices + " device(s)"), lib, loaded, devices, api);
    }

    private static String checkVersion(Path lib, int code) {
        if (code < NcclConstants.MIN_VERSION_CODE) {
            return lib + " is NCCL " + NcclConstants.versionString(code) + "; jcomm needs NCCL >= "
                    + NcclConstants.versionString(NcclConstants.MIN_VERSION_CODE)
                    + " (it calls functions an older library lacks, which would kill the JVM); install a newer one "
                    + "(pip nvidia-nccl-cu13) and point -D" + NCCL_LIBDIR_PROP + " at it";
        }
        return null;
    }

    @SafeVarargs
    private static List<Path> concat(List<Path>... lists) {
        List<Path> out = new ArrayList<>();
        for (List<Path> l : lists) {
            out.addAll(l);
        }
        return out;
    }
}
