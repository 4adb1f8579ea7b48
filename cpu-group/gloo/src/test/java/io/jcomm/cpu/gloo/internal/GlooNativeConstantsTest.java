package io.jcomm.cpu.gloo.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DType;
import io.jcomm.api.ReduceOp;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/**
 * The {@code @Native} constants the JNI glue compiles against equal the Java values they stand for,
 * and the glue takes them from the generated header rather than repeating numbers.
 */
class GlooNativeConstantsTest {

    @Test
    void dtypeAndReduceOpCodesMatchTheApi() {
        assertEquals(DType.F16.code(), GlooNative.DT_F16);
        assertEquals(DType.BF16.code(), GlooNative.DT_BF16);
        assertEquals(DType.F32.code(), GlooNative.DT_F32);
        assertEquals(DType.F64.code(), GlooNative.DT_F64);
        assertEquals(DType.I8.code(), GlooNative.DT_I8);
        assertEquals(DType.U8.code(), GlooNative.DT_U8);
        assertEquals(DType.I32.code(), GlooNative.DT_I32);
        assertEquals(DType.I64.code(), GlooNative.DT_I64);
        assertEquals(DType.BOOL.code(), GlooNative.DT_BOOL);
        assertEquals(ReduceOp.SUM.code(), GlooNative.REDOP_SUM);
        assertEquals(ReduceOp.PROD.code(), GlooNative.REDOP_PROD);
        assertEquals(ReduceOp.MIN.code(), GlooNative.REDOP_MIN);
        assertEquals(ReduceOp.MAX.code(), GlooNative.REDOP_MAX);
        assertEquals(ReduceOp.AVG.code(), GlooNative.REDOP_AVG);
    }

    @Test
    void theHeaderCarriesThemAndTheGlueDefinesNoNumbersOfItsOwn() throws Exception {
        String h = Files.readString(Path.of("target/native-headers/io_jcomm_cpu_gloo_internal_GlooNative.h"),
                StandardCharsets.US_ASCII);
        for (String name : new String[] {"KIND_MISMATCH", "OP_REDUCESCATTER", "DT_BOOL", "REDOP_AVG"}) {
            assertTrue(h.contains("#define io_jcomm_cpu_gloo_internal_GlooNative_" + name + " "), name);
        }
        String cpp = Files.readString(Path.of("src/main/native/gloo_jni.cpp"), StandardCharsets.UTF_8);
        for (String name : new String[] {"KIND_IO", "DT_F16", "OP_SUM", "K_BARRIER"}) {
            assertFalse(cpp.matches("(?s).*constexpr \\w+ " + name + " = \\d.*"), name + " repeated as a number");
        }
    }
}
