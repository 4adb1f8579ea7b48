package io.jcomm.cpu.store.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Declared members of one job leave without a scan over the job's other members. */
class MembersLeaveTest {

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void aCrowdOfMembersLeavesInLinearTime() {
        ServerContext sc = new ServerContext("t", null, 1024, 1024, 16, 1 << 20, 1 << 20, Integer.MAX_VALUE, 256,
                1 << 20, TimeUnit.SECONDS.toNanos(10), TimeUnit.SECONDS.toNanos(10), ServerContext.LegacyPolicy.AUTO,
                false);
        Members m = sc.members();
        int n = 200_000;
        ServerConnection[] cs = new ServerConnection[n];
        Members.Job job = null;
        for (int i = 0; i < n; i++) {
            cs[i] = new ServerConnection(sc);
            job = m.declare("job", cs[i]);
        }
        long t0 = System.nanoTime();
        for (int i = n - 1; i >= 1; i--) {
            assertEquals(List.of(), m.left(job, cs[i], i, false));
        }
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(ms < 1_000, n + " members left in " + ms + " ms (a scan per leave takes seconds)");
        // the last one dies: nobody is left to tell, and the job is remembered as failed
        assertEquals(List.of(), m.left(job, cs[0], 0, true));
        assertEquals(1, m.jobs());
    }
}
