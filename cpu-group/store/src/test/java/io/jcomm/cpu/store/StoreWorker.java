package io.jcomm.cpu.store;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/** Worker of {@link ChronicleMapStoreIT}: two processes share one store file. */
public final class StoreWorker {

    private StoreWorker() {
    }

    public static void main(String[] args) throws Exception {
        int rank = Integer.parseInt(System.getenv("RANK"));
        Path file = Path.of(System.getenv("STORE_FILE"));
        long t0 = System.nanoTime();
        try (ChronicleMapStore s = ChronicleMapStore.open(file, ChronicleMapStore.Options.builder()
                .timeout(Duration.ofSeconds(60)).build(), rank == 0)) {
            System.out.printf("OPENED in %.2f s%n", (System.nanoTime() - t0) / 1e9);
            s.set("hello-" + rank, ("pid " + ProcessHandle.current().pid()).getBytes(StandardCharsets.UTF_8));
            s.wait(List.of("hello-0", "hello-1"));
            for (int i = 0; i < 1000; i++) {
                s.add("counter", 1);
            }
            s.set("added-" + rank, new byte[] {1});
            s.wait(List.of("added-0", "added-1"));
            String total = new String(s.get("counter"), StandardCharsets.US_ASCII);
            System.out.println("COUNTER " + total + " PEER " + new String(s.get("hello-" + (1 - rank)), StandardCharsets.UTF_8));
            if (rank == 1) {
                s.set("bye-1", new byte[0]);
            } else {
                s.get("bye-1"); // the owner deletes the file only after the other process is done
            }
        }
        System.out.println("DONE");
    }
}
