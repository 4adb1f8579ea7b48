package io.jcomm.tools.bench.transfer;

import io.jcomm.tools.bench.TorchProcess;
import io.jcomm.api.HostIdentity;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.transfer.TransferOptions;
import io.jcomm.transfer.bench.ManyToOneBench;
import io.jcomm.transfer.bench.TransferBench;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code commbench transfer}: the one-sided transfer engine one-to-one on this host, by size
 * ({@link TransferBench#measure}: an agent's awaited write over {@code shm} and over {@code tcp}, beside
 * a memcpy and a raw loopback socket in the same run); with {@code --torch}, then the same bytes with
 * torch 1.13 gloo send/recv ({@code scripts/torch_transfer_bench.py}) and the ratio of each transport
 * to it. With {@code --many-to-one}, instead, the head-of-line figures of {@link ManyToOneBench}:
 * small tcp writes alone and beside large writes from several initiators into one owner. With
 * {@code --serve} on one host and {@code --peer} on another, instead, the tcp write between the two
 * hosts beside plain sockets between them ({@link TwoHostTransferBench}).
 */
@Command(name = "transfer", mixinStandardHelpOptions = true,
        description = "One-sided transfers by size (shm, tcp, memcpy, raw socket); --torch: beside torch gloo send/recv; "
                + "--serve on one host and --peer on another: tcp across hosts beside raw sockets.")
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

    @Option(names = "--timeout", description = "seconds the torch side may take, or the two sides across hosts wait for "
            + "each other (default ${DEFAULT-VALUE})")
    int timeoutSeconds = 300;

    @Option(names = "--serve", description = "instead: the owner side across hosts, on the host of --listen: a store server "
            + "there (or the one of --store), an agent with an off-heap region of --max-bytes and a raw socket sink; "
            + "serves one --peer run")
    boolean serve;

    @Option(names = "--listen", paramLabel = "HOST:PORT", description = "with --serve: the address of this host the peer "
            + "reaches; the store server listens on PORT, the agent and the raw sink on free ports of HOST")
    String listen;

    @Option(names = "--store", paramLabel = "HOST:PORT", description = "with --serve: meet in this store instead of starting "
            + "one (the port of --listen is then unused)")
    String store;

    @Option(names = "--peer", paramLabel = "HOST:PORT", description = "instead: the initiator side across hosts: the store "
            + "of the --serve side; measures by size the tcp write, the raw socket round and, once, one raw socket's stream")
    String peer;

    @Option(names = "--token-file", description = "with --serve or --peer: the job token of the store and the agents "
            + "(default: none)")
    Path tokenFile;

    @Option(names = "--tcp-streams", description = "with --peer: tcp connections of the engine to the owner (default "
            + "${DEFAULT-VALUE})")
    int tcpStreams = TransferOptions.TCP_STREAMS_DEFAULT;

    @Option(names = "--tcp-chunk-bytes", description = "with --peer: largest piece a tcp write is split into (default "
            + "${DEFAULT-VALUE})")
    int tcpChunkBytes = TransferOptions.TCP_CHUNK_BYTES_DEFAULT;

    @Option(names = "--many-to-one", description = "instead: N initiators write --max-bytes each into one owner (or --owners) "
            + "over tcp, over and over, while the first also writes --min-bytes one at a time; small-write latency alone and "
            + "under load, beside plain socket rounds; with --serve/--peer across hosts (give both sides the same N, --owners, "
            + "--min-bytes and --max-bytes)")
    Integer manyToOne;

    @Option(names = "--owners", description = "with --many-to-one: the initiators write into this many owners, initiator i "
            + "into owner i mod M (4 prefill ranks into 2 decode ranks: --many-to-one 4 --owners 2; default ${DEFAULT-VALUE})")
    int owners = 1;

    @Override
    public Integer call() throws Exception {
        if (serve || peer != null) {
            return acrossHosts();
        }
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

    /** {@code --serve} or {@code --peer}: one side of the measurement across hosts. */
    private int acrossHosts() throws Exception {
        String err = serve && peer != null ? "give --serve or --peer, not both"
                : serve && listen == null ? "--serve needs --listen HOST:PORT (an address of this host the peer reaches)"
                : !serve && (listen != null || store != null) ? "--listen and --store go with --serve"
                : torch ? "--torch is for one host"
                : manyToOne != null && (manyToOne < 1 || manyToOne > 64 || owners < 1 || owners > manyToOne)
                ? "--many-to-one needs 1 <= N <= 64 and 1 <= --owners <= N"
                : minBytes < 1 || maxBytes < minBytes || maxBytes > 1 << 30 || seconds <= 0 || seconds > 60 || timeoutSeconds < 1
                ? "need 1 <= --min-bytes <= --max-bytes <= 1 GiB, 0 < --seconds <= 60, --timeout >= 1"
                : null;
        HostPort where = null;
        if (err == null) {
            where = HostPort.parse(serve ? (store != null ? store : listen) : peer);
            if (where == null || (serve && store != null && HostPort.host(listen) == null)) {
                err = "an address is HOST:PORT (PORT 1..65535), not " + (serve ? (store != null ? store + " / " + listen : listen) : peer);
            }
        }
        TransferOptions.Builder ob;
        if (err == null) {
            ob = agentOptions(serve ? TwoHostTransferBench.OWNER : TwoHostTransferBench.PEER);
            try {
                ob.build(); // checks the values
            } catch (IllegalArgumentException e) {
                err = e.getMessage();
            }
        } else {
            ob = null;
        }
        if (err != null) {
            System.err.println("commbench transfer: " + err);
            return 2;
        }
        Duration timeout = Duration.ofSeconds(timeoutSeconds);
        TcpStoreServer server = null;
        if (serve && store == null) {
            TcpStoreServerConfig.Builder sb = TcpStoreServerConfig.builder()
                    .name("commbench-transfer").host(where.host()).port(where.port());
            if (tokenFile != null) {
                sb.tokenFile(tokenFile);
            }
            server = TcpStoreServer.start(sb.build());
        }
        TcpStoreConfig.Builder cb = TcpStoreConfig.builder().host(where.host())
                .port(where.port()).timeout(timeout);
        if (tokenFile != null) {
            cb.tokenFile(tokenFile);
        }
        try (TcpStore client = TcpStore.connect(cb.build())) {
            if (serve) {
                return TwoHostTransferBench.serve(client, HostPort.host(listen), maxBytes, ob,
                        o -> agentOptions(TwoHostTransferBench.OWNER + "-m2o-" + o), manyToOne == null ? 0 : manyToOne, owners,
                        minBytes, timeout, System.out) ? 0 : 1;
            }
            if (manyToOne != null) {
                ManyToOneBench.print(System.out, TwoHostTransferBench.measureManyToOne(client, where.host(), manyToOne, minBytes,
                        seconds, i -> agentOptions(TwoHostTransferBench.PEER + "-m2o-" + i), timeout));
                return 0;
            }
            double[] stream = new double[1];
            String to = where.host();
            TwoHostTransferBench.Result r = TwoHostTransferBench.measure(client, to,
                    TwoHostTransferBench.sizes(minBytes, maxBytes), seconds, ob, timeout, s -> {
                        stream[0] = s[0];
                        TwoHostTransferBench.printHeader(System.out, HostIdentity.local(), to, tcpStreams,
                                tcpChunkBytes);
                        TwoHostTransferBench.printStream(System.out, s[0], tcpStreams, s[1]);
                        System.out.flush();
                    }, row -> {
                        TwoHostTransferBench.printRow(System.out, row, stream[0]);
                        System.out.flush();
                    });
            TwoHostTransferBench.printVerdict(System.out, r);
            return 0;
        } finally {
            if (server != null) {
                server.close();
            }
        }
    }

    /** The options of one agent of the measurement across hosts, named {@code name}. */
    private TransferOptions.Builder agentOptions(String name) {
        TransferOptions.Builder b = TransferOptions.builder(name).namespace(TwoHostTransferBench.PREFIX + "agents")
                .tcpStreams(tcpStreams).tcpChunkBytes(tcpChunkBytes).timeout(Duration.ofSeconds(Math.max(30, timeoutSeconds)));
        if (tokenFile != null) {
            b.tokenFile(tokenFile);
        }
        return b;
    }

    /** A parsed {@code HOST:PORT}. */
    record HostPort(String host, int port) {
        static HostPort parse(String s) {
            String h = host(s);
            if (h == null) {
                return null;
            }
            String p = s.substring(s.lastIndexOf(':') + 1);
            if (!p.matches("[0-9]{1,5}") || Integer.parseInt(p) < 1 || Integer.parseInt(p) > 65535) {
                return null;
            }
            return new HostPort(h, Integer.parseInt(p));
        }

        /** The host of {@code HOST:PORT} or of a bare {@code HOST}; null if empty. */
        static String host(String s) {
            if (s == null) {
                return null;
            }
            int colon = s.lastIndexOf(':');
            String h = colon < 0 ? s : s.substring(0, colon);
            return h.isEmpty() || h.length() > 255 ? null : h;
        }
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
        int exit = TorchProcess.run(cmd, timeoutSeconds, "commbench transfer", line -> {
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
        });
        return exit == 0 ? 0 : 1;
    }
}
