package io.jcomm.examples.llama;

import io.jcomm.testkit.Requirements;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Models and their torch references, made once per test JVM by {@code scripts/llama_reference.py}
 * with Debian's {@code /usr/bin/python3} (torch 1.13) under {@code target/torch-reference/<name>}.
 * Without torch the test is skipped, or fails where the run requires torch
 * ({@link Requirements}, {@code JCOMM_REQUIRE=torch} under CI).
 */
final class TorchFixture {

    static final String PYTHON = "/usr/bin/python3";
    static final Path SCRIPT = Path.of(System.getProperty("user.dir")).resolve("../../scripts/llama_reference.py")
            .normalize();
    private static final Path ROOT = Path.of(System.getProperty("user.dir")).resolve("target/torch-reference");
    private static final Map<String, Path> MADE = new HashMap<>();
    private static Boolean torch;

    private TorchFixture() {
    }

    /** The test preset in float32 (seed 16) with 4 requests of 64 and 72 new tokens. */
    static Path f32() {
        return model("f32", "--preset", "test", "--seed", "16", "--dtype", "f32", "--prompts", "4", "--tokens", "64");
    }

    /** Hugging Face's tied embeddings in bfloat16 (2 requests). */
    static Path bf16Tied() {
        return model("bf16-tied", "--preset", "test", "--seed", "16", "--dtype", "bf16", "--tie", "--prompts", "2",
                "--tokens", "64");
    }

    /** Float16 weights (2 requests). */
    static Path f16() {
        return model("f16", "--preset", "test", "--seed", "16", "--dtype", "f16", "--prompts", "2", "--tokens", "64");
    }

    /** The directory of model {@code name}, generated with {@code args} on first use; has reference.json. */
    static synchronized Path model(String name, String... args) {
        Requirements.assume("torch", torchAvailable(), PYTHON + " cannot import torch");
        Path dir = MADE.get(name);
        if (dir != null) {
            return dir;
        }
        dir = ROOT.resolve(name);
        List<String> cmd = new ArrayList<>(List.of(PYTHON, SCRIPT.toString(), "generate", "--out", dir.toString(),
                "--reference", dir.resolve("reference.json").toString()));
        cmd.addAll(List.of(args));
        run(cmd);
        MADE.put(name, dir);
        return dir;
    }

    static Reference reference(Path dir) {
        return Reference.read(dir.resolve("reference.json"));
    }

    private static void run(List<String> cmd) {
        try {
            Files.createDirectories(ROOT);
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            String out;
            try (var in = p.getInputStream()) {
                out = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            }
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IllegalStateException("timed out: " + cmd);
            }
            System.out.print(out);
            if (p.exitValue() != 0) {
                throw new IllegalStateException(cmd + " failed (" + p.exitValue() + "):\n" + out);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private static synchronized boolean torchAvailable() {
        if (torch == null) {
            try {
                Process p = new ProcessBuilder(PYTHON, "-c", "import torch").redirectErrorStream(true).start();
                p.getInputStream().readAllBytes();
                torch = p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0;
            } catch (IOException e) {
                torch = false;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                torch = false;
            }
        }
        return torch;
    }
}
