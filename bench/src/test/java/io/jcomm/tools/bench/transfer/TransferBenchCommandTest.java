package io.jcomm.tools.bench.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.testkit.FreePorts;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import picocli.CommandLine;

/**
 * {@code commbench transfer} across hosts, both sides in this JVM on loopback: the argument checks, a
 * one-to-one run and a many-to-few run between a {@code --serve} and a {@code --peer}, each printing its
 * table and ending with exit code 0.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TransferBenchCommandTest {

    /** Runs {@code commbench transfer args...}; returns the exit code and what it printed. */
    private static synchronized Object[] run(String... args) {
        PrintStream out = System.out;
        PrintStream err = System.err;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream capture = new PrintStream(buf, true, StandardCharsets.UTF_8);
        System.setOut(capture);
        System.setErr(capture);
        try {
            int code = new CommandLine(new TransferBenchCommand()).execute(args);
            return new Object[] {code, buf.toString(StandardCharsets.UTF_8)};
        } finally {
            System.setOut(out);
            System.setErr(err);
        }
    }

    @Test
    void badCombinationsAreRefusedWithExitCode2() {
        for (String[] args : new String[][] {
                {"--serve"},
                {"--serve", "--listen", "127.0.0.1:1", "--peer", "127.0.0.1:1"},
                {"--peer", "127.0.0.1:1", "--torch"},
                {"--peer", "127.0.0.1:1", "--many-to-one", "0"},
                {"--peer", "127.0.0.1:1", "--many-to-one", "2", "--owners", "3"},
                {"--peer", "nonsense"},
                {"--many-to-one", "2", "--owners", "3"}}) {
            Object[] r = run(args);
            assertEquals(2, r[0], String.join(" ", args) + " gave\n" + r[1]);
            assertTrue(((String) r[1]).contains("commbench transfer"), (String) r[1]);
        }
    }

    /** Both sides at once: the serving side in the background, the peer here. */
    private static String[] both(String[] serve, String[] peer) throws Exception {
        CompletableFuture<Object[]> s = CompletableFuture.supplyAsync(() -> new CommandLine(new TransferBenchCommand())
                .execute(serve) == 0 ? new Object[] {0} : new Object[] {1});
        Thread.sleep(1500); // the store server starts listening
        PrintStream out = System.out;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        System.setOut(new PrintStream(buf, true, StandardCharsets.UTF_8));
        int code;
        try {
            code = new CommandLine(new TransferBenchCommand()).execute(peer);
        } finally {
            System.setOut(out);
        }
        String printed = buf.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, printed);
        assertEquals(0, s.get(60, TimeUnit.SECONDS)[0], "the serving side failed");
        return printed.split("\n");
    }

    @Test
    void aServingSideAndAPeerMeasureOneToOneAndManyToFew() throws Exception {
        int port = FreePorts.find();
        String at = "127.0.0.1:" + port;
        String[] rows = both(new String[] {"--serve", "--listen", at, "--max-bytes", "65536", "--timeout", "60"},
                new String[] {"--peer", at, "--min-bytes", "4096", "--max-bytes", "65536", "--seconds", "0.05", "--timeout", "60"});
        String all = String.join("\n", rows);
        for (String size : new String[] {"4096", "16384", "65536"}) {
            assertTrue(all.matches("(?s).*\\n\\s+" + size + "\\s+[0-9.]+\\s.*"), "no row for " + size + ":\n" + all);
        }
        assertTrue(all.contains("# raw stream"), all);

        port = FreePorts.find();
        at = "127.0.0.1:" + port;
        rows = both(new String[] {"--serve", "--listen", at, "--max-bytes", "1048576", "--min-bytes", "4096", "--many-to-one", "3",
                        "--owners", "2", "--timeout", "60"},
                new String[] {"--peer", at, "--max-bytes", "1048576", "--min-bytes", "4096", "--many-to-one", "3", "--owners", "2",
                        "--seconds", "0.1", "--timeout", "60"});
        all = String.join("\n", rows);
        assertTrue(all.contains("3 initiators x 1048576-byte writes into 2 owners"), all);
        assertTrue(all.contains("raw round, beside them"), all);
        assertTrue(all.contains("p99 under load"), all);
    }
}
