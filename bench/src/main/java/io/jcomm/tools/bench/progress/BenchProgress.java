package io.jcomm.tools.bench.progress;

import io.jcomm.tools.bench.plot.BenchRun;
import java.io.PrintStream;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Progress of a long benchmark run on stderr: every {@code interval} while the run goes on, one line
 * naming the operation, the backend and the size being measured ({@code commbench: allreduce tcp:
 * measuring 16M (5/9), 42 s}). Runs shorter than the interval print nothing. The measuring side
 * reports each finished size with {@link #sizeDone}.
 */
public final class BenchProgress implements AutoCloseable {

    private final String label;
    private final List<Long> sizes;
    private final PrintStream err;
    private final long startNanos = System.nanoTime();
    private final Thread ticker;
    private volatile int done;
    private volatile boolean closed;

    private BenchProgress(String label, List<Long> sizes, PrintStream err, long intervalMillis) {
        this.label = label;
        this.sizes = List.copyOf(sizes);
        this.err = err;
        this.ticker = new Thread(() -> tick(intervalMillis), "commbench-progress");
        this.ticker.setDaemon(true);
    }

    /** Starts reporting; {@code intervalMillis <= 0} reports nothing. */
    public static BenchProgress start(String op, String backend, List<Long> sizes, PrintStream err, long intervalMillis) {
        BenchProgress p = new BenchProgress(op + " " + backend, sizes, err, intervalMillis);
        if (intervalMillis > 0) {
            p.ticker.start();
        }
        return p;
    }

    /** A size finished (they finish in order). */
    public void sizeDone(long bytes) {
        done = Math.min(done + 1, sizes.size());
    }

    /** The current status line. */
    public String status() {
        long s = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - startNanos);
        int d = done;
        if (d >= sizes.size()) {
            return String.format(Locale.ROOT, "commbench: %s: all %d sizes done, finishing, %d s", label, sizes.size(), s);
        }
        String what = d == 0 ? "warming up, then " + BenchRun.humanSize(sizes.get(0)) : "measuring "
                + BenchRun.humanSize(sizes.get(d));
        return String.format(Locale.ROOT, "commbench: %s: %s (%d/%d), %d s", label, what, d + 1, sizes.size(), s);
    }

    private void tick(long intervalMillis) {
        while (!closed) {
            try {
                Thread.sleep(intervalMillis);
            } catch (InterruptedException e) {
                return;
            }
            if (!closed) {
                synchronized (err) {
                    err.println(status());
                }
            }
        }
    }

    @Override
    public void close() {
        closed = true;
        ticker.interrupt();
    }
}
