package io.jcomm.tools.bench;

import java.io.IOException;
import java.io.InputStream;

/**
 * Ends a benchmark worker JVM when its launcher goes away: the launcher keeps the worker's stdin
 * open, so end-of-file (or a broken pipe) on stdin means the launcher died; the worker then halts
 * at once rather than waiting on peers that will never come.
 */
public final class ParentWatch {

    private ParentWatch() {
    }

    /** Starts a daemon thread that halts this JVM with {@code exitCode} when stdin closes. */
    public static void start(int exitCode) {
        Thread watch = new Thread(() -> {
            InputStream in = System.in;
            byte[] buf = new byte[64];
            try {
                while (in.read(buf) >= 0) {
                    // only end-of-file matters
                }
            } catch (IOException ignored) {
                // a broken pipe: the launcher is gone too
            }
            io.jcomm.runtime.recorder.FlightRecorder.releaseFile(); // halt skips the hook that removes it
            Runtime.getRuntime().halt(exitCode);
        }, "parent-watch");
        watch.setDaemon(true);
        watch.start();
    }
}
