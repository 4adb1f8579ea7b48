import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * What moving a block between two cores costs on this machine, the floor under a shared-memory
 * all-reduce of that size: a writer thread copies a block into a shared buffer, a reader thread then
 * copies it out, in turns (a volatile turn counter hands over). Prints the writer's and the reader's
 * median copy time, with the reader reading the buffer (the writer's lines then have a copy in the other
 * core, which every write must invalidate) and without (the writer's lines stay its own).
 * Run: {@code java scripts/bench/CoherenceCost.java [BYTES] [ROUNDS]} (defaults 65536, 100000).
 */
public class CoherenceCost {
    static volatile long turn;

    public static void main(String[] args) throws Exception {
        int bytes = args.length > 0 ? Integer.parseInt(args[0]) : 65536;
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 100_000;
        for (boolean reads : new boolean[] {true, false}) {
            long[][] t = run(bytes, rounds, reads);
            System.out.printf("%d B, reader %s: writer's copy in %.2f us, reader's copy out %.2f us (medians of %d)%n",
                    bytes, reads ? "reads the block" : "reads nothing", median(t[0]) / 1e3, median(t[1]) / 1e3, rounds);
        }
    }

    private static long[][] run(int bytes, int rounds, boolean reads) throws InterruptedException {
        ByteBuffer shared = ByteBuffer.allocateDirect(bytes);
        ByteBuffer src = ByteBuffer.allocateDirect(bytes);
        ByteBuffer dst = ByteBuffer.allocateDirect(bytes);
        long[] w = new long[rounds];
        long[] r = new long[rounds];
        turn = 0;
        Thread writer = new Thread(() -> {
            for (int k = 0; k < rounds; k++) {
                while (turn != 2L * k) {
                    Thread.onSpinWait();
                }
                long t0 = System.nanoTime();
                shared.duplicate().put(src.duplicate());
                w[k] = System.nanoTime() - t0;
                turn = 2L * k + 1;
            }
        });
        writer.start();
        for (int k = 0; k < rounds; k++) {
            while (turn != 2L * k + 1) {
                Thread.onSpinWait();
            }
            long t0 = System.nanoTime();
            if (reads) {
                dst.duplicate().put(shared.duplicate());
            }
            r[k] = System.nanoTime() - t0;
            turn = 2L * k + 2;
        }
        writer.join();
        return new long[][] {w, r};
    }

    private static long median(long[] a) {
        long[] s = a.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }
}
