package io.jcomm.mq;

import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.store.Store;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * How the ranks of a queue's group exchange the few small messages of
 * {@link MessageQueue#create(QueueExchange, int, MessageQueueOptions)}: an all-gather of byte
 * arrays, in the same order on every rank.
 *
 * <p>Two kinds: {@link #over(ProcessGroup)} uses the group's object collectives (the queue is then
 * made at a point of the group's program order, like any collective); {@link #overStore} uses a
 * rendezvous store, so that a queue can be made beside a group that other threads keep using. An
 * exchange is used by one thread.
 */
public interface QueueExchange {

    /** Largest message a rank may contribute (the handshake's messages are a few hundred bytes). */
    int MAX_MESSAGE_BYTES = 64 * 1024;

    /** The group's name, for error messages. */
    String groupName();

    /** This process's rank in the group. */
    int rank();

    /** Number of ranks. */
    int size();

    /**
     * Every rank's {@code mine}, in rank order. Collective: every rank calls it the same number of
     * times.
     *
     * @throws io.jcomm.api.CommException on timeout, a dead peer or a message over
     *                                    {@link #MAX_MESSAGE_BYTES}
     */
    List<byte[]> allGather(byte[] mine, Deadline deadline);

    /** Over the object collectives of {@code group}. */
    static QueueExchange over(ProcessGroup group) {
        Objects.requireNonNull(group, "group");
        return new QueueExchange() {
            @Override
            public String groupName() {
                return group.name();
            }

            @Override
            public int rank() {
                return group.rank();
            }

            @Override
            public int size() {
                return group.size();
            }

            @Override
            public List<byte[]> allGather(byte[] mine, Deadline deadline) {
                return group.allGatherObject(mine, byte[].class, deadline.remaining());
            }
        };
    }

    /**
     * Through {@code store}: round {@code k} of rank {@code r} is the key {@code <prefix>k/r}. The
     * prefix must be the same on every rank and used by no other exchange (the keys stay in the
     * store: a few hundred bytes per queue). Values longer than {@link #MAX_MESSAGE_BYTES} are
     * rejected before they are decoded.
     */
    static QueueExchange overStore(Store store, String prefix, String groupName, int rank, int size) {
        Objects.requireNonNull(store, "store");
        Objects.requireNonNull(prefix, "prefix");
        Objects.requireNonNull(groupName, "groupName");
        if (size < 1 || rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank " + rank + " of " + size);
        }
        return new QueueExchange() {
            private int round;

            @Override
            public String groupName() {
                return groupName;
            }

            @Override
            public int rank() {
                return rank;
            }

            @Override
            public int size() {
                return size;
            }

            @Override
            public List<byte[]> allGather(byte[] mine, Deadline deadline) {
                OpContext ctx = OpContext.of(groupName, rank, "createMessageQueue");
                if (mine.length > MAX_MESSAGE_BYTES) {
                    throw new ProtocolException(ctx, "handshake message of " + mine.length + " B exceeds "
                            + MAX_MESSAGE_BYTES + " B");
                }
                String base = prefix + (round++) + "/";
                store.set(base + rank, mine);
                List<String> keys = new ArrayList<>(size);
                for (int r = 0; r < size; r++) {
                    keys.add(base + r);
                }
                List<byte[]> all = store.multiGet(keys, deadline.remaining());
                for (int r = 0; r < size; r++) {
                    byte[] v = all.get(r);
                    if (v == null || v.length > MAX_MESSAGE_BYTES) {
                        throw new ProtocolException(ctx, "handshake message of rank " + r + " is "
                                + (v == null ? "missing" : v.length + " B, over " + MAX_MESSAGE_BYTES + " B"));
                    }
                }
                return all;
            }
        };
    }
}
