package io.jcomm.it.reliability;

import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Two ranks of a tcp group with the default options: rank 0 sends {@code messages} messages of
 * {@code bytes} bytes to rank 1 as fast as it can; rank 1 receives them more slowly (a 1 ms pause every
 * 50) and checks each. Both print {@code RSS <rank> base <kB> max <kB>}: the resident set after the first
 * {@value #WARM_UP} messages and its maximum afterwards. Arguments: {@code <messages> <bytes>}.
 */
public final class SlowConsumerWorker {

    private SlowConsumerWorker() {
    }

    /**
     * Messages before the base is taken: with the same-host fast path 2,000 messages pass in under 0.1 s,
     * while the JIT and the heap are still growing, so the base is taken later (a sixth of the default run).
     */
    static final int WARM_UP = 10_000;

    public static void main(String[] args) throws Exception {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        int messages = Integer.parseInt(args[0]);
        int bytes = Integer.parseInt(args[1]);
        try (TcpStore store = TcpRendezvous.connect(cfg);
             ProcessGroup g = CpuGroups.create(CpuGroupOptions.fromConfig(cfg, store).toBuilder().backend("tcp")
                     .groupName("slow").build())) {
            Tensor x = Tensor.allocate(DType.U8, bytes);
            long base = 0;
            long max = 0;
            long t0 = System.nanoTime();
            for (int m = 0; m < messages; m++) {
                if (g.rank() == 0) {
                    x.fill(m & 0x7f);
                    g.send(x, 1, 0);
                } else {
                    if (m % 50 == 0) {
                        Thread.sleep(1);
                    }
                    g.recv(x, 0, 0);
                    if (x.getDouble(0) != (m & 0x7f) || x.getDouble(bytes - 1) != (m & 0x7f)) {
                        throw new IllegalStateException("message " + m + " has " + x.getDouble(0));
                    }
                }
                if (m == WARM_UP) {
                    base = rssKb();
                } else if (m > WARM_UP && m % 500 == 0) {
                    max = Math.max(max, rssKb());
                }
            }
            System.out.println("RSS " + g.rank() + " base " + base + " max " + max + " ms " + (System.nanoTime() - t0) / 1_000_000);
            g.barrier();
        }
    }

    static long rssKb() throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        throw new IOException("no VmRSS in /proc/self/status");
    }
}
