package io.jcomm.tools.bench.mq;

import io.aeron.ExclusivePublication;
import io.aeron.Image;
import io.aeron.Subscription;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.Deadline;
import io.jcomm.mq.AeronMedia;
import io.jcomm.mq.IdleConfig;
import io.jcomm.mq.MessageQueueOptions;
import io.jcomm.mq.QueueHandle;
import io.jcomm.mq.QueueReader;
import io.jcomm.tools.bench.ParentWatch;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Base64;
import org.HdrHistogram.Histogram;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.IdleStrategy;

/**
 * A reader process of {@code commbench mq}, started by {@link MqBenchCommand}: opens the queue from
 * the handle file, records the one-way latency of every measured message (receive time minus the
 * writer's {@code System.nanoTime()} stamp: one clock per host on Linux) and prints each size's
 * histogram on standard output. Reader 1 also echoes the raw Aeron IPC ping-pong of the floor
 * measurement. Exits when its standard input closes (the parent died) or the queue closes.
 *
 * <p>Arguments: {@code handleFile rank remote(0|1) idle aeronDir|- tag udpAddress wakeups(0|1)}.
 */
public final class MqBenchReader {

    private MqBenchReader() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.start(3);
        Path handleFile = Path.of(args[0]);
        int rank = Integer.parseInt(args[1]);
        boolean remote = args[2].equals("1");
        IdleConfig idle = IdleConfig.parse(args[3]);
        String aeronDir = args[4];
        AeronMedia.Options mo = AeronMedia.Options.builder().tag(args[5]).build();
        MessageQueueOptions opts = MessageQueueOptions.builder().idle(idle).udpAddress(args[6])
                .wakeups(args.length < 8 || args[7].equals("1")).build();
        QueueHandle handle = QueueHandle.decode(Files.readAllBytes(handleFile));
        AeronMedia media = remote ? AeronMedia.launch(mo) : AeronMedia.attach(Path.of(aeronDir), mo);
        try (media; QueueReader r = QueueReader.open(media, handle, rank, remote ? rank : 0, opts,
                Deadline.after(Duration.ofSeconds(60)))) {
            System.out.println("READY " + rank);
            System.out.flush();
            Histogram h = new Histogram(3_600_000_000_000L, 3);
            Duration wait = Duration.ofMinutes(10);
            while (true) {
                DirectBuffer m;
                try {
                    m = r.dequeue(wait);
                } catch (CommClosedException e) {
                    break;
                }
                long now = System.nanoTime();
                int phase = m.getInt(MqBenchCommand.PHASE_OFFSET);
                if (phase == MqBenchCommand.PHASE_MEASURE) {
                    h.recordValue(Math.max(0, now - m.getLong(MqBenchCommand.STAMP_OFFSET)));
                } else if (phase == MqBenchCommand.PHASE_END_OF_SIZE) {
                    int size = m.getInt(MqBenchCommand.ARG_OFFSET);
                    ByteBuffer bb = ByteBuffer.allocate(h.getNeededByteBufferCapacity());
                    int n = h.encodeIntoCompressedByteBuffer(bb);
                    byte[] bytes = new byte[n];
                    bb.flip();
                    bb.get(bytes);
                    System.out.println("HIST " + rank + " " + size + " " + Base64.getEncoder().encodeToString(bytes));
                    System.out.flush();
                    h.reset();
                } else if (phase == MqBenchCommand.PHASE_FLOOR && m.getInt(MqBenchCommand.ARG_OFFSET + 4) == rank) {
                    int stream = m.getInt(MqBenchCommand.ARG_OFFSET);
                    IdleConfig floorIdle = m.getInt(MqBenchCommand.ARG_OFFSET + 8) == 1 ? IdleConfig.spinning()
                            : IdleConfig.yielding();
                    r.release();
                    echo(media, stream, floorIdle.newStrategy());
                }
            }
        }
        System.out.println("BYE " + rank);
        System.out.flush();
    }

    /**
     * The raw Aeron IPC echo of the floor measurement: subscribe to {@code stream}, reply on
     * {@code stream + 1}, until a message starting with -1.
     */
    private static void echo(AeronMedia media, int stream, IdleStrategy idle) {
        try (Subscription sub = media.aeron().addSubscription("aeron:ipc", stream);
             ExclusivePublication pub = media.aeron().addExclusivePublication("aeron:ipc?term-length=4m", stream + 1)) {
            while (sub.imageCount() == 0 || !pub.isConnected()) {
                idle.idle();
            }
            Image image = sub.imageAtIndex(0);
            System.out.println("FLOOR READY");
            System.out.flush();
            boolean[] stop = {false};
            while (!stop[0]) {
                int n = image.poll((buffer, offset, length, header) -> {
                    if (buffer.getLong(offset) == -1) {
                        stop[0] = true; // end of the floor measurement
                        return;
                    }
                    while (pub.offer(buffer, offset, length) < 0) {
                        Thread.onSpinWait();
                    }
                }, 16);
                idle.idle(n);
            }
        }
    }

}
