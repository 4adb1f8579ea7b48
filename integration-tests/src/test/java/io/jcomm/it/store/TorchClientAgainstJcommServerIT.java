package io.jcomm.it.store;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A real torch 1.13 client ({@code TCPStore(is_master=False)}) against commstore in its own JVM. */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class TorchClientAgainstJcommServerIT {

    @Test
    void torchClientDoesEveryOperationIncludingATimedOutWait() throws Exception {
        TorchProcess.assumeTorch();
        try (StoreServerProcess server = StoreServerProcess.start()) {
            TorchOps.run(server.port);
            // one log line per connection event, with the dialect
            server.awaitLog("dialect=torch-legacy", Duration.ofSeconds(30));
            server.awaitLog("dialect=jcomm/2.1", Duration.ofSeconds(30));
        }
    }
}
