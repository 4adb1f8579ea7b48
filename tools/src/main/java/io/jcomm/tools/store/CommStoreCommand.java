package io.jcomm.tools.store;

import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code bin/commstore}: a standalone PyTorch-compatible TCP store server. Serves torch 1.13 - 2.x
 * clients ({@code torch.distributed.TCPStore(host, port, is_master=False)}) and jcomm clients at
 * once, until killed (SIGTERM/SIGINT close it cleanly). Logs one line when listening
 * ({@code commstore: listening on HOST:PORT ...}) and one line per connection event: open, and
 * close with the dialect, the remote address and the reason when the server dropped it.
 *
 * <p>With {@code --data DIR} the keys are kept in {@code DIR}: a commstore killed (even with
 * {@code kill -9}) and started again on the same directory and port resumes with every key, and jcomm
 * clients that were waiting reconnect and go on within their deadlines.
 *
 * <p>With {@code --token-file} every client must authenticate with the job token; torch clients
 * cannot, so they are all refused.
 */
@Command(name = "commstore", mixinStandardHelpOptions = true,
        description = "Runs a PyTorch-compatible TCP rendezvous store server until killed.")
public final class CommStoreCommand implements Callable<Integer> {

    @Option(names = "--host", defaultValue = TcpStoreServerConfig.HOST_DEFAULT,
            description = "bind address (default ${DEFAULT-VALUE}; 0.0.0.0 for every interface)")
    String host;

    @Option(names = "--port", defaultValue = "29500", description = "port, 0 for an ephemeral one (default ${DEFAULT-VALUE})")
    int port;

    @Option(names = "--token-file", description = "job token file: clients must authenticate (refuses torch clients)")
    Path tokenFile;

    @Option(names = "--max-key-bytes", defaultValue = "8192")
    int maxKeyBytes;

    @Option(names = "--max-value-bytes", defaultValue = "8388608")
    int maxValueBytes;

    @Option(names = "--max-keys-per-request", defaultValue = "131072")
    int maxKeysPerRequest;

    @Option(names = "--max-request-bytes", defaultValue = "67108864")
    long maxRequestBytes;

    @Option(names = "--max-store-bytes", defaultValue = "1073741824")
    long maxStoreBytes;

    @Option(names = "--max-connections", defaultValue = "2147483647",
            description = "an optional cap on established connections (default: none)")
    int maxConnections;

    @Option(names = "--max-open-connections", defaultValue = "0",
            description = "all connections together; 0 derives the bound from the descriptor limit (default "
                    + "${DEFAULT-VALUE}); at the bound the oldest connection without a complete request gives way")
    int maxOpenConnections;

    @Option(names = "--max-pending-connections", defaultValue = "256",
            description = "connections holding part of a first request; the oldest gives way to a newer one "
                    + "(default ${DEFAULT-VALUE})")
    int maxPendingConnections;

    @Option(names = "--backlog", defaultValue = "0",
            description = "listen backlog; 0 = the kernel's somaxconn (default ${DEFAULT-VALUE})")
    int backlog;

    @Option(names = "--world-size", defaultValue = "${env:WORLD_SIZE:-0}",
            description = "clients the job will connect, for the capacity warning at start (default: $WORLD_SIZE, "
                    + "else unknown)")
    int worldSize;

    @Option(names = "--incomplete-request-timeout-ms", defaultValue = "10000",
            description = "close a connection that holds part of a request this long (default ${DEFAULT-VALUE})")
    long incompleteRequestTimeoutMs;

    @Option(names = "--handshake-timeout-ms", defaultValue = "10000")
    long handshakeTimeoutMs;

    @Option(names = "--legacy-mode", defaultValue = "AUTO",
            description = "numbering of connections without VALIDATE: AUTO, TORCH_1_13, TORCH_2_1 (default ${DEFAULT-VALUE})")
    TcpStoreServerConfig.LegacyMode legacyMode;

    @Option(names = "--transport", defaultValue = "AUTO", description = "AUTO, EPOLL, NIO (default ${DEFAULT-VALUE})")
    TcpStoreServerConfig.Transport transport;

    @Option(names = "--data", description = "keep the keys in this directory (created when absent): every change is "
            + "written to its data file before the reply, and a commstore started again on it resumes with every key; "
            + "jcomm clients ride over the restart. Default: in memory only")
    Path dataDir;

    @Option(names = "--max-data-bytes", defaultValue = "4294967296",
            description = "bound of the data file; a change that does not fit is refused (default ${DEFAULT-VALUE})")
    long maxDataBytes;

    @Option(names = "--data-fsync", description = "force every change to the device before the reply (survives a "
            + "machine crash, not only a killed store; one device flush per change)")
    boolean dataFsync;

    @Option(names = "--quiet", description = "do not log every connection")
    boolean quiet;

    public static void main(String[] args) {
        setDefault("org.slf4j.simpleLogger.logFile", "System.out");
        setDefault("org.slf4j.simpleLogger.showDateTime", "true");
        setDefault("org.slf4j.simpleLogger.dateTimeFormat", "yyyy-MM-dd'T'HH:mm:ss.SSSZ");
        setDefault("org.slf4j.simpleLogger.showThreadName", "false");
        setDefault("org.slf4j.simpleLogger.showShortLogName", "true");
        System.exit(new CommandLine(new CommStoreCommand()).execute(args));
    }

    private static void setDefault(String key, String value) {
        if (System.getProperty(key) == null) {
            System.setProperty(key, value);
        }
    }

    @Override
    public Integer call() throws InterruptedException {
        TcpStoreServerConfig.Builder b = TcpStoreServerConfig.builder().host(host).port(port).name("commstore")
                .maxKeyBytes(maxKeyBytes).maxValueBytes(maxValueBytes).maxKeysPerRequest(maxKeysPerRequest)
                .maxRequestBytes(maxRequestBytes).maxStoreBytes(maxStoreBytes).maxConnections(maxConnections)
                .maxPendingConnections(maxPendingConnections).maxOpenConnections(maxOpenConnections).backlog(backlog)
                .expectedClients(worldSize)
                .incompleteRequestTimeout(Duration.ofMillis(incompleteRequestTimeoutMs))
                .handshakeTimeout(Duration.ofMillis(handshakeTimeoutMs)).legacyMode(legacyMode).transport(transport)
                .logConnections(!quiet).dataDir(dataDir).maxDataBytes(maxDataBytes).dataFsync(dataFsync);
        if (tokenFile != null) {
            b.tokenFile(tokenFile);
        }
        TcpStoreServer server = TcpStoreServer.start(b.build());
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            server.close();
            stopped.countDown();
        }, "commstore-shutdown"));
        stopped.await();
        return 0;
    }
}
