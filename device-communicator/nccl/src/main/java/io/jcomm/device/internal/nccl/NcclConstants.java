package io.jcomm.device.internal.nccl;

import io.jcomm.api.DType;
import io.jcomm.api.ReduceOp;

/**
 * NCCL and CUDA constants as plain Java values (same numbers as {@code nccl.h} /
 * {@code driver_types.h}; a unit test checks them against JavaCPP's), so that the Java logic never
 * touches a JavaCPP class before the native libraries are known to load. Also the mappings from
 * {@link DType} and {@link ReduceOp}.
 */
public final class NcclConstants {

    private NcclConstants() {
    }

    /** The NCCL release the JavaCPP bindings in use ({@code org.bytedeco:cuda}) were generated from: 2.29. */
    public static final int BINDINGS_VERSION_CODE = 22900;

    /**
     * The oldest libnccl that is loaded: 2.14.0, the release that added {@code ncclCommFinalize}, the
     * newest of the functions {@link JavaCppNcclApi} calls. The bindings resolve NCCL's symbols lazily
     * (no {@code BIND_NOW}), so an older library than {@link #BINDINGS_VERSION_CODE} loads and works as
     * long as every function called exists in it; calling one it lacks kills the JVM, hence this floor,
     * checked before anything is loaded. {@code NcclSymbolsTest} keeps it in step with the calls.
     * (PyTorch 2.11's wheels ship NCCL 2.28.9: refusing everything before 2.29 refused them.)
     */
    public static final int MIN_VERSION_CODE = 21400;

    /**
     * The first release with {@code ncclCommShrink} (2.27.0): {@link JavaCppNcclApi} calls it only on a
     * library of this version or later (checked at run time), not counted in {@link #MIN_VERSION_CODE}.
     */
    public static final int SHRINK_MIN_VERSION_CODE = 22700;
    /** {@code NCCL_SHRINK_DEFAULT}: shrink a healthy communicator. */
    public static final int SHRINK_DEFAULT = 0;
    /** {@code NCCL_SHRINK_ABORT}: shrink after an error, aborting the parent's operations in flight. */
    public static final int SHRINK_ABORT = 1;

    public static final int UNIQUE_ID_BYTES = 128;

    // ncclResult_t
    public static final int SUCCESS = 0;
    public static final int UNHANDLED_CUDA_ERROR = 1;
    public static final int SYSTEM_ERROR = 2;
    public static final int INTERNAL_ERROR = 3;
    public static final int INVALID_ARGUMENT = 4;
    public static final int INVALID_USAGE = 5;
    public static final int REMOTE_ERROR = 6;
    public static final int IN_PROGRESS = 7;

    // ncclDataType_t
    public static final int INT8 = 0;
    public static final int UINT8 = 1;
    public static final int INT32 = 2;
    public static final int UINT32 = 3;
    public static final int INT64 = 4;
    public static final int UINT64 = 5;
    public static final int FLOAT16 = 6;
    public static final int FLOAT32 = 7;
    public static final int FLOAT64 = 8;
    public static final int BFLOAT16 = 9;

    // ncclRedOp_t
    public static final int OP_SUM = 0;
    public static final int OP_PROD = 1;
    public static final int OP_MAX = 2;
    public static final int OP_MIN = 3;
    public static final int OP_AVG = 4;

    // cudaError_t / flags
    public static final int CUDA_SUCCESS = 0;
    public static final int CUDA_ERROR_INVALID_VALUE = 1;
    public static final int CUDA_ERROR_INSUFFICIENT_DRIVER = 35;
    public static final int CUDA_ERROR_NO_DEVICE = 100;
    public static final int CUDA_ERROR_NOT_READY = 600;
    public static final int CUDA_STREAM_CAPTURE_STATUS_NONE = 0;

    /** NCCL's data type for {@code dtype}; {@code BOOL} travels as {@code uint8}. */
    public static int dataType(DType dtype) {
        switch (dtype) {
            case F16: return FLOAT16;
            case BF16: return BFLOAT16;
            case F32: return FLOAT32;
            case F64: return FLOAT64;
            case I8: return INT8;
            case U8: return UINT8;
            case BOOL: return UINT8;
            case I32: return INT32;
            case I64: return INT64;
            default: throw new IllegalArgumentException("no NCCL type for " + dtype);
        }
    }

    /**
     * NCCL's reduction for {@code op} on {@code dtype}. As in PyTorch, for {@code BOOL} a sum is a
     * logical or ({@code max}) and a product a logical and ({@code min}); AVG on bool is rejected
     * by the argument checks before this is called.
     */
    public static int redOp(ReduceOp op, DType dtype) {
        boolean bool = dtype == DType.BOOL;
        switch (op) {
            case SUM: return bool ? OP_MAX : OP_SUM;
            case PROD: return bool ? OP_MIN : OP_PROD;
            case MIN: return OP_MIN;
            case MAX: return OP_MAX;
            case AVG: return OP_AVG;
            default: throw new IllegalArgumentException("no NCCL op for " + op);
        }
    }

    /** {@code major.minor.patch} of an NCCL version code (both the pre-2.9 and the current encoding). */
    public static String versionString(int code) {
        int major;
        int minor;
        int patch;
        if (code < 10000) { // NCCL < 2.9: major*1000 + minor*100 + patch
            major = code / 1000;
            minor = (code % 1000) / 100;
            patch = code % 100;
        } else {
            major = code / 10000;
            minor = (code % 10000) / 100;
            patch = code % 100;
        }
        return major + "." + minor + "." + patch;
    }

    /** The version code for {@code major.minor.patch} as {@code NCCL_VERSION()} computes it. */
    public static int versionCode(int major, int minor, int patch) {
        if (major < 2 || (major == 2 && minor < 9)) {
            return major * 1000 + minor * 100 + patch;
        }
        return major * 10000 + minor * 100 + patch;
    }

    /** Errors that say the call was wrong, not that the communicator broke. */
    public static boolean isArgumentError(int result) {
        return result == INVALID_ARGUMENT || result == INVALID_USAGE;
    }
}
