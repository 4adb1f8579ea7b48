package io.jcomm.mq;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The collective path across 4 JVMs with the real TCP store and CPU group: one media driver per
 * host for the job, two queues (writers 0 and 2), ranks 0-2 on host A (IPC) and rank 3 forced onto
 * host B by {@code JCOMM_HOST_ID} (UDP on loopback).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class MessageQueueCollectiveIT {

    @Test
    void twoQueuesOverOneDriverPerHostWithARemoteRank() throws Exception {
        String tag = MessageQueueIT.tag("mqcoll");
        try (MultiJvm job = MultiJvm.builder().name("collective").worldSize(4).mainClass(CollectiveWorker.class)
                .env("MQ_TAG", tag).maxHeap("512m")
                .envForRank(r -> Map.of("JCOMM_HOST_ID", r == 3 ? "hostB" : "hostA"))
                .deadline(Duration.ofSeconds(150)).start()) {
            MultiJvm.Results r = job.awaitAll();
            r.assertAllSucceeded();
            assertEquals(1, r.linesContaining(0, "local [1, 2] remote [3]").size());
            assertEquals(1, r.linesContaining(0, "Q2 local [0, 1] remote [3]").size());
            assertEquals(1, r.linesContaining(0, "WRITER 0 DELIVERED 10005").size());
            assertEquals(1, r.linesContaining(2, "WRITER 2 DELIVERED 10005").size());
            assertEquals(1, r.linesContaining(1, "READER 1 OF 0 OK local").size());
            assertEquals(1, r.linesContaining(1, "READER 1 OF 2 OK local").size());
            assertEquals(1, r.linesContaining(0, "READER 0 OF 2 OK local").size());
            assertEquals(1, r.linesContaining(3, "READER 3 OF 0 OK remote").size());
            assertEquals(1, r.linesContaining(3, "READER 3 OF 2 OK remote").size());
            for (int rank = 0; rank < 4; rank++) {
                assertEquals(1, r.linesContaining(rank, "RANK " + rank + " OK").size());
            }
        }
        MessageQueueIT.assertNoShmFiles(tag);
    }
}
