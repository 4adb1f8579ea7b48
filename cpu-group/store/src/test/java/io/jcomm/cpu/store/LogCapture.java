package io.jcomm.cpu.store;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/**
 * Tees {@code System.err} (where slf4j-simple writes, looked up at every log call) into a buffer, so
 * that a test can assert on the server's log lines.
 */
final class LogCapture implements AutoCloseable {

    private final PrintStream original = System.err;
    private final ByteArrayOutputStream buffer = new ByteArrayOutputStream();

    LogCapture() {
        OutputStream tee = new OutputStream() {
            @Override
            public void write(int b) {
                synchronized (buffer) {
                    buffer.write(b);
                }
                original.write(b);
            }

            @Override
            public void write(byte[] b, int off, int len) {
                synchronized (buffer) {
                    buffer.write(b, off, len);
                }
                original.write(b, off, len);
            }
        };
        System.setErr(new PrintStream(tee, true, StandardCharsets.UTF_8));
    }

    List<String> lines() {
        String all;
        synchronized (buffer) {
            all = buffer.toString(StandardCharsets.UTF_8);
        }
        return new ArrayList<>(List.of(all.split("\n")));
    }

    /** Waits (bounded) for a line matching {@code match}; returns it or null. */
    String await(Predicate<String> match, Duration timeout) throws InterruptedException {
        long end = System.nanoTime() + timeout.toNanos();
        do {
            for (String l : lines()) {
                if (match.test(l)) {
                    return l;
                }
            }
            Thread.sleep(10);
        } while (System.nanoTime() < end);
        return null;
    }

    @Override
    public void close() {
        System.setErr(original);
    }
}
