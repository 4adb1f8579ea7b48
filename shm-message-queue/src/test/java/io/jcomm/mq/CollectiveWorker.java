package io.jcomm.mq;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.cpu.codec.ForyCodec;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import java.time.Duration;
import java.util.List;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Worker of {@link MessageQueueCollectiveIT}: the real path of an application. Each rank reads its
 * torchrun environment, joins the TCP store and a real CPU group, creates one media driver per host
 * for the job ({@link AeronMedia#forGroup}) and two queues over it (writer 0 and writer 2), and
 * checks what it receives. {@code JCOMM_HOST_ID} puts rank 3 on "another host" (UDP).
 */
public final class CollectiveWorker {

    public record Step(int step, List<String> names) {
    }

    private CollectiveWorker() {
    }

    public static void main(String[] args) throws Exception {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        ForyCodec codec = ForyCodec.builder().register(Step.class).build();
        Duration t = Duration.ofSeconds(60);
        AeronMedia.Options mo = AeronMedia.Options.builder().tag(System.getenv("MQ_TAG")).build();
        try (TcpStore store = TcpRendezvous.connect(cfg);
             ProcessGroup world = CpuGroups.create(CpuGroupOptions.fromConfig(cfg, store).toBuilder()
                     .backend("tcp").codec(codec).timeout(t).build());
             AeronMedia media = AeronMedia.forGroup(world, cfg.hostId(), mo)) {
            MessageQueueOptions opts = MessageQueueOptions.builder().media(media).hostId(cfg.hostId())
                    .udpAddress("127.0.0.1").build();
            long t0 = System.nanoTime();
            try (MessageQueue q0 = MessageQueue.create(world, 0, opts);
                 MessageQueue q2 = MessageQueue.create(world, 2, opts)) {
                System.out.printf("CREATED in %.1f ms: local %s remote %s%n", (System.nanoTime() - t0) / 1e6,
                        q0.localReaders(), q0.remoteReaders());
                System.out.println("Q2 local " + q2.localReaders() + " remote " + q2.remoteReaders());
                exercise(q0, world.rank());
                exercise(q2, world.rank());
                world.barrier();
            }
            System.out.println("RANK " + world.rank() + " OK " + (world.rank() == 3 ? "udp" : "ipc"));
        }
    }

    static final int[] SIZES = {0, 100, 1 << 20, 16 << 20};

    static void exercise(MessageQueue q, int rank) {
        if (q.isWriter()) {
            for (int size : SIZES) {
                byte[] b = new byte[size];
                for (int i = 0; i < size; i++) {
                    b[i] = (byte) (i * 13 + size);
                }
                q.enqueue(b);
            }
            UnsafeBuffer m = new UnsafeBuffer(new byte[16]);
            for (int i = 0; i < 10_000; i++) {
                m.putLong(0, i);
                q.enqueue(m, 0, 16, Duration.ofSeconds(30));
            }
            long last = q.enqueueObject(new Step(7, List.of("from", "rank " + rank)));
            q.awaitDelivered(last);
            System.out.println("WRITER " + rank + " DELIVERED " + last);
            return;
        }
        for (int size : SIZES) {
            byte[] b = q.dequeueBytes();
            if (b.length != size) {
                throw new AssertionError("size " + b.length + " != " + size);
            }
            for (int i = 0; i < size; i++) {
                if (b[i] != (byte) (i * 13 + size)) {
                    throw new AssertionError("byte " + i + " of " + size);
                }
            }
        }
        for (int i = 0; i < 10_000; i++) {
            DirectBuffer v = q.dequeue();
            if (v.getLong(0) != i) {
                throw new AssertionError("message " + i + " got " + v.getLong(0));
            }
        }
        Step s = q.dequeueObject(Step.class);
        if (!s.equals(new Step(7, List.of("from", "rank " + q.writerRank())))) {
            throw new AssertionError("object " + s);
        }
        System.out.println("READER " + rank + " OF " + q.writerRank() + " OK" + (q.isRemoteReader() ? " remote" : " local"));
        try {
            q.dequeue(Duration.ofMillis(1));
            throw new AssertionError("extra message");
        } catch (io.jcomm.api.CommTimeoutException expected) {
            // nothing more until the writer closes
        } catch (CommClosedException alsoFine) {
            // the writer already closed
        }
    }
}
