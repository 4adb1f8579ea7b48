package io.jcomm.examples.llama;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.HalfFloats;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The safetensors reader and writer: round trips in each dtype, shards, and hostile files. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class SafeTensorsTest {

    @TempDir
    Path dir;

    private static float[] values(int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) {
            v[i] = (float) Math.sin(i * 0.37) * (1 + i % 7);
        }
        return v;
    }

    @Test
    void roundTripsEachDtypeAndReadsBlocks() {
        float[] w = values(6 * 10);
        float[] norm = values(10);
        for (String dtype : List.of("F32", "F16", "BF16")) {
            Path f = dir.resolve(dtype + ".safetensors");
            new SafeTensorsWriter(dtype).add("b.weight", w, 6, 10).add("a.norm", norm, 10).write(f);
            try (SafeTensors st = SafeTensors.open(f)) {
                assertEquals(List.of("a.norm", "b.weight"), List.copyOf(st.names()), "data in name order, as Python writes");
                assertEquals(Map.of("format", "pt"), st.metadata());
                assertEquals(dtype, st.entry("b.weight").dtype());
                float[] all = st.read("b.weight");
                for (int i = 0; i < w.length; i++) {
                    assertEquals(rounded(dtype, w[i]), all[i], 0.0, dtype + " element " + i);
                }
                // rows 2..4, columns 3..7: what a row-parallel shard reads
                float[] block = st.readBlock("b.weight", 2, 3, 3, 5);
                for (int r = 0; r < 3; r++) {
                    for (int c = 0; c < 5; c++) {
                        assertEquals(all[(2 + r) * 10 + 3 + c], block[r * 5 + c], 0.0);
                    }
                }
                assertArrayEquals(java.util.Arrays.copyOfRange(all, 10, 30), st.readBlock("b.weight", 1, 2, 0, 10));
                assertThrows(IllegalArgumentException.class, () -> st.readBlock("b.weight", 5, 2, 0, 10));
                assertThrows(IllegalArgumentException.class, () -> st.readBlock("a.norm", 0, 1, 0, 1));
                assertThrows(IllegalArgumentException.class, () -> st.expect("b.weight", 10, 6));
                assertThrows(IllegalArgumentException.class, () -> st.entry("missing"));
            }
        }
    }

    private static float rounded(String dtype, float v) {
        switch (dtype) {
            case "F16":
                return HalfFloats.f16ToFloat(HalfFloats.floatToF16(v));
            case "BF16":
                return HalfFloats.bf16ToFloat(HalfFloats.floatToBf16(v));
            default:
                return v;
        }
    }

    /** A file of {@code header} (as given) and {@code data} bytes, with a stated header length. */
    private Path file(long statedLength, String header, int data) throws IOException {
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        ByteBuffer b = ByteBuffer.allocate(8 + h.length + data).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(statedLength).put(h);
        Path f = Files.createTempFile(dir, "bad", ".safetensors");
        Files.write(f, b.array());
        return f;
    }

    private Path file(String header, int data) throws IOException {
        return file(header.getBytes(StandardCharsets.UTF_8).length, header, data);
    }

    private static void assertMalformed(Path f, String expected) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SafeTensors.open(f).close());
        assertTrue(e.getMessage().contains(expected), e.getMessage() + " should say " + expected);
    }

    @Test
    void rejectsMalformedFiles() throws IOException {
        String ok = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
        try (SafeTensors st = SafeTensors.open(file(ok, 8))) {
            assertEquals(2, st.read("x").length);
        }
        Path tiny = dir.resolve("tiny");
        Files.write(tiny, new byte[5]);
        assertMalformed(tiny, "shorter than the 8-byte header length");
        // lengths stated beyond the file, beyond the limit, negative as unsigned: refused before allocating
        assertMalformed(file(1L << 40, ok, 8), "header length 1099511627776");
        assertMalformed(file(-1L, ok, 8), "header length 18446744073709551615");
        assertMalformed(file(ok.length() + 100, ok, 8), "is not within");
        assertMalformed(file("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8), "malformed JSON");
        assertMalformed(file("[1,2]", 0), "does not start with '{'");
        assertMalformed(file("{\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8), "needs 12 bytes");
        assertMalformed(file("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,16]}}", 8), "not within the 8 data bytes");
        assertMalformed(file("{\"x\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), "unknown dtype F33");
        assertMalformed(file("{\"x\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8), "non-negative");
        assertMalformed(file("{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                + "\"data_offsets\":[0,8]}}", 8), "overflows");
        assertMalformed(file("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                + "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12), "overlaps");
        assertMalformed(file("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8), "a gap before it");
        assertMalformed(file(ok, 12), "the tensors end at data offset 8 but the file holds 12");
        assertMalformed(file("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                + "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8), "duplicate key");
        assertMalformed(file("{\"__metadata__\":{\"a\":1}}", 0), "must be a string");
        assertMalformed(file("{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"extra\":1}}", 8),
                "unknown field");
        StringBuilder deep = new StringBuilder("{\"__metadata__\":");
        deep.append("[".repeat(100)).append("]".repeat(100)).append('}');
        assertMalformed(file(deep.toString(), 0), "nested deeper");
        // a well-formed file with an integer tensor: listed, not read as floats
        try (SafeTensors st = SafeTensors.open(file("{\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8))) {
            assertEquals("I64", st.entry("i").dtype());
            assertThrows(IllegalArgumentException.class, () -> st.read("i"));
        }
    }

    @Test
    void jsonParserIsStrict() {
        assertEquals(Map.of("a", List.of(1L, 2.5, "x\u00e9\n", true, false)),
                Json.parse(" {\"a\": [1, 2.5, \"x\\u00e9\\n\", true, false]} "));
        assertEquals(-3L, Json.parse("-3"));
        assertEquals(1e-5, Json.parse("1e-5"));
        for (String bad : List.of("", "{", "[1,]", "{\"a\":1,}", "01", "1.", "1e", "\"\\x\"", "\"\\ud800\"", "tru",
                "{\"a\" 1}", "1 2", "1e999", "\"a\u0001\"", "{a:1}")) {
            assertThrows(IllegalArgumentException.class, () -> Json.parse(bad), bad);
        }
        assertEquals("\"a\\\"b\\\\c\\u000a\"", Json.quote("a\"b\\c\n"));
    }

    @Test
    void configReadsHuggingFaceFields() {
        LlamaConfig c = LlamaConfig.parse("{\"hidden_size\": 64, \"intermediate_size\": 172, \"num_hidden_layers\": 2,"
                + " \"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"vocab_size\": 100, \"rms_norm_eps\": 1e-05,"
                + " \"rope_theta\": 500000.0, \"tie_word_embeddings\": true, \"hidden_act\": \"silu\","
                + " \"torch_dtype\": \"bfloat16\"}", "test");
        assertEquals(new LlamaConfig(64, 172, 2, 8, 2, 8, 100, 1e-5, 500000.0, true), c);
        assertEquals(c, LlamaConfig.parse(c.toJson(), "round trip"));
        // defaults: kv heads = heads, eps 1e-6, theta 10000, untied
        LlamaConfig d = LlamaConfig.parse("{\"hidden_size\": 64, \"intermediate_size\": 10, \"num_hidden_layers\": 1,"
                + " \"num_attention_heads\": 4, \"vocab_size\": 10}", "test");
        assertEquals(new LlamaConfig(64, 10, 1, 4, 4, 16, 10, 1e-6, 10000.0, false), d);
        for (String bad : List.of("{\"hidden_size\": 64}",
                "{\"hidden_size\": 64, \"intermediate_size\": 10, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                        + " \"num_key_value_heads\": 3, \"vocab_size\": 10}",
                "{\"hidden_size\": 64, \"intermediate_size\": 10, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                        + " \"vocab_size\": 10, \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}}",
                "{\"hidden_size\": 64, \"intermediate_size\": 10, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                        + " \"vocab_size\": 10, \"hidden_act\": \"gelu\"}",
                "{\"hidden_size\": \"64\", \"intermediate_size\": 10, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                        + " \"vocab_size\": 10}")) {
            assertThrows(IllegalArgumentException.class, () -> LlamaConfig.parse(bad, "test"), bad);
        }
    }
}
