package io.jcomm.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.ray.ActorId;
import io.jcomm.testkit.ChildJvm;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link Device} and {@link ActorId} compare as records do (by every component) without the
 * records' generated methods, whose first call links {@code java.lang.runtime.ObjectMethods} (tens
 * of milliseconds in a fresh JVM, paid by every rank's first device operation).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ValueEqualityTest {

    @Test
    void devicesAndActorIdsAreEqualExactlyWhenEveryComponentIs() {
        assertEquals(Device.cuda(1), new Device("cuda", 1));
        assertEquals(Device.cuda(1).hashCode(), new Device("cuda", 1).hashCode());
        assertEquals(Device.CPU, Device.parse("cpu"));
        assertNotEquals(Device.cuda(1), Device.cuda(0));
        assertNotEquals(Device.cuda(0), new Device("npu", 0));
        assertNotEquals(Device.CPU, Device.cuda(0));
        assertFalse(Device.CPU.equals(null));
        assertFalse(Device.CPU.equals("cpu"));
        ActorId a = new ActorId(1, 2);
        assertEquals(a, ActorId.parse(a.toHex()));
        assertEquals(a.hashCode(), ActorId.parse(a.toHex()).hashCode());
        assertNotEquals(a, new ActorId(2, 1));
        assertNotEquals(a, new ActorId(1, 3));
        assertFalse(a.equals(null));
        assertNotEquals(new ActorId(0, 1).hashCode(), new ActorId(1, 0).hashCode(), "the halves are not mixed symmetrically");
    }

    @Test
    void comparingThemLinksNoRecordMethods() throws Exception {
        String out = ChildJvm.classLoads(Child.class, List.of("-Xshare:off"));
        assertTrue(out.contains("child: 3 true true"), out);
        assertFalse(out.contains("java.lang.runtime.ObjectMethods "), "a record's generated method was linked");
    }

    /** Compares and hashes devices and actor ids, then says how it went. */
    public static final class Child {
        public static void main(String[] args) {
            java.util.Set<Object> set = new java.util.HashSet<>(List.of(Device.cuda(0), new ActorId(1, 2), Device.CPU));
            System.out.println("child: " + set.size() + " " + set.contains(new Device("cuda", 0)) + " "
                    + new ActorId(1, 2).equals(ActorId.parse(new ActorId(1, 2).toHex())));
        }
    }
}
