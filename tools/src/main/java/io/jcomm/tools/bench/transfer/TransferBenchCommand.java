package io.jcomm.tools.bench.transfer;

import io.jcomm.transfer.bench.ManyToOneBench;
import io.jcomm.transfer.bench.TransferBench;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code commbench transfer}: the one-sided transfer engine one-to-one on this host, by size
 * ({@link TransferBench#measure}: an agent's awaited write over {@code shm} and over {@code tcp}, beside
 * a memcpy and a raw loopback socket in the same run); with {@code --torch}, then the same bytes with
 * torch 1.13 gloo send/recv ({@code scripts/torch_transfer_bench.py}) and the ratio of each transport
 * to it. With {@code --many-to-one}, instead, the head-of-line figures of {@link ManyToOneBench}:
 * small tcp writes alone and beside large writes from several initiators into one owner.
 */
@Command(name = "transfer", mixinStandardHelpOptions = true,
        description = "One-sided transfers by size (shm, tcp, memcpy, raw socket); --torch: beside torch gloo send/recv.")
public final class TransferBenchCommand implements Callable<Integer> {

    @Option(names = "--min-bytes", description = "smallest size (default ${DEFAULT-VALUE})")
    int minBytes = 4096;

    @Option(names = "--max-bytes", description = "largest size; sizes grow by 4 (default ${DEFAULT-VALUE})")
    int maxBytes = 16 << 20;

    @Option(names = "--seconds", description = "seconds per path and size, over three interleaved trials (default ${DEFAULT-VALUE})")
    double seconds = 0.3;

    @Option(names = "--torch", description = "then move the same sizes with torch gloo send/recv (/usr/bin/python3) and "
            + "print the ratios")
    boolean torch;

    @Option(names = "--script", description = "path of torch_transfer_bench.py (default: scripts/ of the jcomm checkout)")
    Path script;

    @Option(names = "--timeout", description = "seconds the torch side may take (default ${DEFAULT-VALUE})")
    int timeoutSeconds = 300;

    @Option(names = "--many-to-one", description = "instead: N initiators write --max-bytes each into one owner over tcp, "
            + "over and over, while the first also writes --min-bytes one at a time; small-write latency alone and under load")
    Integer manyToOne;

    @Option(names = "--owners", description = "with --many-to-one: the initiators write into this many owners, initiator i "
            + "into owner i mod M (4 prefill ranks into 2 decode ranks: --many-to-one 4 --owners 2; default ${DEFAULT-VALUE})")
    int owners = 1;

    @Override
    public Integer call() throws Exception {
        if (manyToOne != null) {
            if (manyToOne < 1 || manyToOne > 64 || owners < 1 || owners > manyToOne || minBytes < 1 || maxBytes < minBytes || maxBytes > 1 << 30 || seconds <= 0
                    || seconds > 60) {
                System.err.println("commbench transfer --many-to-one: need 1 <= N <= 64, 1 <= --owners <= N, 1 <= --min-bytes <= --max-bytes <= 1 GiB, "
                        + "0 < --seconds <= 60");
                return 2;
            }
            ManyToOneBench.print(System.out, ManyToOneBench.measure(manyToOne, owners, maxBytes, minBytes, seconds));
            return 0;
        }
        if (minBytes < 1 || maxBytes < minBytes || maxBytes > 1 << 30 || seconds <= 0 || seconds > 60 || timeoutSeconds < 1) {
            System.err.println("commbench transfer: need 1 <= --min-bytes <= --max-bytes <= 1 GiB, 0 < --seconds <= 60, --timeout >= 1");
            return 2;
        }
        TransferBench.printHeader(System.out);
        List<TransferBench.Row> rows = TransferBench.measure(minBytes, maxBytes, seconds, r -> {
            TransferBench.printRow(System.out, r);
            System.out.flush();
        });
        if (!torch) {
            return 0;
        }
        Map<Integer, Double> gloo = new LinkedHashMap<>();
        int code = runTorch(TransferBench.sizes(minBytes, maxBytes), gloo);
        if (code != 0) {
            return code;
        }
        System.out.printf(Locale.ROOT, "%n# beside torch gloo send/recv (the bytes one way and an 8-byte ack, awaited)%n");
        System.out.printf(Locale.ROOT, "%10s %12s %12s %12s %10s %10s%n", "bytes", "gloo GB/s", "shm GB/s", "tcp GB/s",
                "shm/gloo", "tcp/gloo");
        for (TransferBench.Row r : rows) {
            Double g = gloo.get(r.bytes());
            if (g == null) {
                System.err.println("commbench transfer: the torch side gave no figure for " + r.bytes() + " bytes");
                return 1;
            }
            System.out.printf(Locale.ROOT, "%10d %12.3f %12.2f %12.2f %9.1fx %9.1fx%n", r.bytes(), r.bytes() / g / 1e9,
                    r.bytes() / r.shm() / 1e9, r.bytes() / r.tcp() / 1e9, g / r.shm(), g / r.tcp());
        }
        return 0;
    }

    /** Runs the torch script; fills {@code secondsPerOp} by size. */
    private int runTorch(List<Integer> sizes, Map<Integer, Double> secondsPerOp) throws Exception {
        Path py = script != null ? script : Path.of("scripts", "torch_transfer_bench.py");
        if (!Files.isRegularFile(py)) {
            System.err.println("commbench transfer: " + py + " not found (--script)");
            return 2;
        }
        StringBuilder sizeArg = new StringBuilder();
        sizes.forEach(s -> sizeArg.append(sizeArg.length() > 0 ? "," : "").append(s));
        List<String> cmd = new ArrayList<>(List.of("/usr/bin/python3", py.toString(), "--sizes", sizeArg.toString(),
                "--seconds", Double.toString(seconds)));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.startsWith("ROW ")) {
                        Map<String, String> kv = new LinkedHashMap<>();
                        for (String f : line.split(" ")) {
                            int eq = f.indexOf('=');
                            if (eq > 0) {
                                kv.put(f.substring(0, eq), f.substring(eq + 1));
                            }
                        }
                        synchronized (secondsPerOp) {
                            secondsPerOp.put(Integer.parseInt(kv.get("bytes")), Double.parseDouble(kv.get("seconds_per_op")));
                        }
                    } else {
                        System.out.println("[torch] " + line);
                    }
                }
            } catch (java.io.IOException e) {
                // the process went away: its exit status says how
            }
        }, "torch-output");
        reader.setDaemon(true);
        reader.start();
        if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            System.err.println("commbench transfer: the torch side took longer than " + timeoutSeconds + " s");
            return 1;
        }
        reader.join(TimeUnit.SECONDS.toMillis(5));
        synchronized (secondsPerOp) {
            return p.exitValue() == 0 ? 0 : 1;
        }
    }
}
