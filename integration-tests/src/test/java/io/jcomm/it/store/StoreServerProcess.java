package io.jcomm.it.store;

import io.jcomm.testkit.MultiJvm;
import io.jcomm.tools.store.CommStoreCommand;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** {@code commstore} (the main class behind {@code bin/commstore}) in its own JVM. */
final class StoreServerProcess implements AutoCloseable {

    private static final Pattern LISTENING = Pattern.compile("listening on [^ ]*:(\\d+)");

    final MultiJvm jvm;
    final int port;

    private StoreServerProcess(MultiJvm jvm, int port) {
        this.jvm = jvm;
        this.port = port;
    }

    static StoreServerProcess start(String... extraArgs) {
        return startOn(0, extraArgs);
    }

    /** On {@code port} (0: an ephemeral one). */
    static StoreServerProcess startOn(int port, String... extraArgs) {
        List<String> args = new ArrayList<>(List.of("--port", Integer.toString(port)));
        args.addAll(List.of(extraArgs));
        MultiJvm jvm = MultiJvm.builder().name("commstore").worldSize(1).mainClass(CommStoreCommand.class)
                .args(args.toArray(new String[0])).maxHeap("256m").deadline(Duration.ofMinutes(3)).start();
        try {
            String line = jvm.awaitLine(0, l -> LISTENING.matcher(l).find(), Duration.ofSeconds(60));
            Matcher m = LISTENING.matcher(line);
            if (!m.find()) {
                throw new AssertionError(line);
            }
            return new StoreServerProcess(jvm, Integer.parseInt(m.group(1)));
        } catch (RuntimeException | AssertionError e) {
            jvm.close();
            throw e;
        }
    }

    /** Waits for a server log line containing {@code text}. */
    String awaitLog(String text, Duration timeout) {
        return jvm.awaitLine(0, text, timeout);
    }

    @Override
    public void close() {
        jvm.close();
    }
}
