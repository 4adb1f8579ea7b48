package io.jcomm.transfer;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.InMemoryStore;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Device tensors registered through a device provider's copies ({@link FakeDeviceProvider}, whose
 * "device" is host memory it alone touches): remote writes land on the device, remote reads come from
 * it, device tensors are sources and targets of an agent's own transfers, descriptors out of range are
 * refused without a copy, and a failed device copy is a typed refusal after which the region goes on
 * working. Two agents over real loopback sockets.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class DeviceRegionTest {

    private static final Set<Permission> RW = EnumSet.of(Permission.READ, Permission.WRITE);
    private static final int BLOCK = 64 << 10;
    private static final int BLOCKS = 16;
    private final InMemoryStore store = new InMemoryStore(Duration.ofSeconds(10));
    private final List<TransferAgent> agents = new ArrayList<>();

    private TransferAgent agent(String name) {
        TransferAgent a = TransferAgent.open(store, TransferOptions.builder(name).timeout(Duration.ofSeconds(10)).build());
        agents.add(a);
        return a;
    }

    @AfterEach
    void close() {
        for (TransferAgent a : agents) {
            a.close();
        }
        store.close();
    }

    private static byte[] bytes(ByteBuffer b) {
        byte[] a = new byte[b.remaining()];
        b.duplicate().get(a);
        return a;
    }

    @Test
    void deviceRegionsAreWrittenReadAndUsedAsSourcesThroughTheProvidersCopies() {
        TransferAgent owner = agent("dev-owner");
        TransferAgent init = agent("dev-init");
        Tensor device = FakeDeviceProvider.allocate(BLOCK * BLOCKS);
        MemoryRegion d = owner.register(device, RW);
        assertEquals(MemoryKind.DEVICE, d.kind());
        assertEquals(MemoryKind.DEVICE, d.descriptor().kind());

        // remote writes of permuted blocks from host memory land on the device, then the notification
        MemoryRegion src = init.register(ByteBuffer.allocateDirect(BLOCK * BLOCKS), Set.of());
        TransferAgentTest.fill(src.buffer(), 3);
        List<LocalDescriptor> ls = new ArrayList<>();
        List<RemoteDescriptor> rs = new ArrayList<>();
        for (int i = 0; i < BLOCKS; i++) {
            ls.add(src.slice((long) i * BLOCK, BLOCK));
            rs.add(d.descriptor((long) (i * 5 % BLOCKS) * BLOCK, BLOCK));
        }
        init.write(ls, rs, "on-device".getBytes(UTF_8), Duration.ofSeconds(10)).await();
        assertEquals("on-device", new String(owner.pollNotification(Duration.ofSeconds(5)).orElseThrow().payload(), UTF_8));
        ByteBuffer dev = FakeDeviceProvider.memory(device);
        for (int i = 0; i < BLOCKS; i++) {
            ByteBuffer want = src.buffer().duplicate().position(i * BLOCK).limit((i + 1) * BLOCK);
            ByteBuffer got = dev.duplicate().position(i * 5 % BLOCKS * BLOCK).limit((i * 5 % BLOCKS + 1) * BLOCK);
            assertEquals(want, got, "block " + i + " on the device");
        }

        // the owner's code changes the device's bytes; a remote read sees them, into a local device tensor
        FakeDeviceProvider.memory(device).put(7, (byte) 0x5a).put(BLOCK * BLOCKS - 1, (byte) 0x6b);
        Tensor back = FakeDeviceProvider.allocate(BLOCK * BLOCKS);
        MemoryRegion b = init.register(back, Set.of());
        init.read(List.of(b.all()), List.of(d.descriptor()), Duration.ofSeconds(10)).await();
        assertArrayEquals(bytes(FakeDeviceProvider.memory(device)), bytes(FakeDeviceProvider.memory(back)));

        // a local device tensor is the source of a write into host memory
        MemoryRegion host = owner.register(ByteBuffer.allocateDirect(BLOCK), RW);
        init.write(b.slice(BLOCK, BLOCK), host.descriptor(), null, Duration.ofSeconds(10)).await();
        assertEquals(FakeDeviceProvider.memory(back).position(BLOCK).limit(2 * BLOCK), host.buffer().duplicate().clear());

        // out of range: refused before any copy, the device untouched
        byte[] before = bytes(FakeDeviceProvider.memory(device));
        int copies = FakeDeviceProvider.COPIES.get();
        RemoteDescriptor outside = new RemoteDescriptor(d.descriptor().agent(), d.id(), d.generation(), MemoryKind.DEVICE,
                (long) BLOCK * BLOCKS - 4096, BLOCK, d.permissions());
        TransferRefusedException r = assertThrows(TransferRefusedException.class,
                () -> init.write(src.slice(0, BLOCK), outside, null, Duration.ofSeconds(10)).await());
        assertEquals(TransferRefusedException.Reason.OUT_OF_RANGE, r.reason());
        assertEquals(copies, FakeDeviceProvider.COPIES.get());
        assertArrayEquals(before, bytes(FakeDeviceProvider.memory(device)));

        // a failed device copy on the owner is a typed refusal; the region goes on working
        FakeDeviceProvider.FAIL_NEXT.set(1);
        r = assertThrows(TransferRefusedException.class,
                () -> init.write(src.slice(0, BLOCK), d.descriptor(0, BLOCK), null, Duration.ofSeconds(10)).await());
        assertEquals(TransferRefusedException.Reason.DEVICE, r.reason());
        assertTrue(r.getMessage().contains("injected device copy failure"), r.getMessage());
        init.write(src.slice(0, BLOCK), d.descriptor(0, BLOCK), null, Duration.ofSeconds(10)).await();
        assertEquals(src.buffer().duplicate().limit(BLOCK), FakeDeviceProvider.memory(device).limit(BLOCK));

        owner.deregister(d);
        r = assertThrows(TransferRefusedException.class,
                () -> init.write(src.slice(0, BLOCK), d.descriptor(0, BLOCK), null, Duration.ofSeconds(10)).await());
        assertEquals(TransferRefusedException.Reason.STALE, r.reason());
    }

    @Test
    void aDeviceTypeThatNoProviderCopiesIsRefusedAtRegistration() {
        TransferAgent a = agent("dev-none");
        Tensor t = Tensor.onDevice(Device.of("nosuchdevice", 0), 0x1000, DType.U8, new long[] {16}, null);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> a.register(t, RW));
        assertTrue(e.getMessage().contains("no available device provider copies nosuchdevice memory"), e.getMessage());
    }
}
