package io.jcomm.it.store;

import io.jcomm.cpu.store.StoreFuzz;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Hostile frames from many connections against commstore in its own JVM (256 MiB heap), then a
 * torch client and our client still get correct answers (the heap bound itself is asserted in
 * cpu-group-store's TcpStoreFuzzTest, where the server's memory can be measured).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class FuzzThenTorchIT {

    @Test
    void serverStillServesTorchCorrectlyAfterTheStorm() throws Exception {
        TorchProcess.assumeTorch();
        try (StoreServerProcess server = StoreServerProcess.start("--quiet")) {
            AtomicInteger sent = new AtomicInteger();
            ExecutorService pool = Executors.newFixedThreadPool(6);
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 6; t++) {
                long seed = 77 + t;
                fs.add(pool.submit(() -> {
                    Random r = new Random(seed);
                    while (sent.get() < 10_000) {
                        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), server.port)) {
                            s.setSoLinger(true, 0);
                            OutputStream o = s.getOutputStream();
                            for (int i = 0; i < 3 && sent.get() < 10_000; i++) {
                                o.write(StoreFuzz.hostileFrame(r, 8192));
                                sent.incrementAndGet();
                            }
                        } catch (IOException closedByServer) {
                            // expected
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get(120, TimeUnit.SECONDS);
            }
            pool.shutdown();
            TorchOps.run(server.port);
        }
    }
}
