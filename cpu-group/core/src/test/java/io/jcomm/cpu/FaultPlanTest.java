package io.jcomm.cpu;

import io.jcomm.api.config.Settings;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.ProcessGroup;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.FaultPlan.Action;
import io.jcomm.cpu.FaultPlan.Fault;
import io.jcomm.cpu.FaultPlan.Phase;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The {@code JCOMM_FAULT} grammar: what it accepts, what it rejects (naming the bad part), and matching. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class FaultPlanTest {

    @Test
    void parsesEveryActionAndKey() {
        FaultPlan p = FaultPlan.parse("kill@rank=1,group=tp:0,op=all_reduce,seq=200; stall:5s@rank=2,group=tp:*,"
                + "phase=after ;cut@rank=0,op=broadcastObject,seq=3,phase=before");
        assertEquals(List.of(
                new Fault(Action.KILL, Duration.ZERO, 1, "tp:0", "allReduce", 200, Phase.BEFORE),
                new Fault(Action.STALL, Duration.ofSeconds(5), 2, "tp:*", "*", 1, Phase.AFTER),
                new Fault(Action.CUT, Duration.ZERO, 0, "*", "broadcastObject", 3, Phase.BEFORE)), p.faults());
    }

    @Test
    void defaultsAreAnyGroupAnyOperationFromTheFirstBefore() {
        Fault f = FaultPlan.parse("KILL@RANK=3").faults().get(0);
        assertEquals(new Fault(Action.KILL, Duration.ZERO, 3, "*", "*", 1, Phase.BEFORE), f);
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "500ms | 500",
        "2s    | 2000",
        "1m    | 60000",
        "' 3s '| 3000"})
    void stallDurations(String text, long millis) {
        Fault f = FaultPlan.parse("stall:" + text + "@rank=0").faults().get(0);
        assertEquals(Duration.ofMillis(millis), f.stall());
    }

    @Test
    void operationNamesInEveryAcceptedSpelling() {
        for (String spelling : List.of("allReduce", "all_reduce", "allreduce", "ALL_REDUCE")) {
            assertEquals("allReduce", FaultPlan.parse("cut@rank=0,op=" + spelling).faults().get(0).op(), spelling);
        }
        assertEquals("batchIsendIrecv", FaultPlan.parse("cut@rank=0,op=batch_isend_irecv").faults().get(0).op());
    }

    @Test
    void textRoundTrips() {
        String text = "kill@rank=1,group=tp:0,op=allReduce,seq=200,phase=before;"
                + "stall:1500ms@rank=2,group=pp:*,op=*,seq=1,phase=after;stall:2m@rank=0,group=*,op=send,seq=9,phase=before";
        FaultPlan p = FaultPlan.parse(text);
        assertEquals(text, p.toString());
        assertEquals(p, FaultPlan.parse(p.toString()));
    }

    @Test
    void emptyTextIsNoFault() {
        assertSame(FaultPlan.NONE, FaultPlan.parse(""));
        assertSame(FaultPlan.NONE, FaultPlan.parse("   "));
        assertTrue(FaultPlan.NONE.isEmpty());
        assertEquals("", FaultPlan.NONE.toString());
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "kill                              | found no",
        "explode@rank=1                    | unknown action",
        "stall@rank=1                      | stall needs a duration",
        "stall:5@rank=1                    | needs a unit",
        "stall:5h@rank=1                   | needs a unit",
        "stall:0s@rank=1                   | must be positive",
        "stall:ms@rank=1                   | must be digits and a unit",
        "stall:2000m@rank=1                | at most",
        "stall:99999999999999999999s@rank=1 | too large",
        "kill@group=tp:0                   | rank=N is required",
        "kill@rank=-1                      | rank must be in [0,",
        "kill@rank=one                     | rank is not an integer: ",
        "kill@rank=1,seq=0                 | seq must be in [1,",
        "kill@rank=1,seq=2.5               | seq is not an integer",
        "kill@rank=1,op=allreduse          | unknown operation",
        "kill@rank=1,phase=during          | phase must be before or after",
        "kill@rank=1,colour=red            | unknown key",
        "kill@rank=1,rank=2                | given twice",
        "kill@rank=1,group=                | empty value for group",
        "kill@rank=1,,seq=2                | is not key=value",
        "kill@rank=1 seq=2                 | rank is not an integer",
        "kill@rank=1;;cut@rank=2           | empty fault",
        "kill@rank=1;                      | empty fault"})
    void rejectsMalformedTextNamingTheBadPart(String text, String expected) {
        // (the expected texts avoid quotes: CsvSource reads them as quoting)
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> FaultPlan.parse(text));
        assertTrue(e.getMessage().contains(expected), e.getMessage());
        assertTrue(e.getMessage().startsWith("fault "), "names the fault: " + e.getMessage());
    }

    @Test
    void faultsNameTheirPositionInThePlan() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> FaultPlan.parse("kill@rank=1;cut@rank=2,op=nope"));
        assertTrue(e.getMessage().startsWith("fault 2 'cut@rank=2,op=nope': unknown operation 'nope'"), e.getMessage());
    }

    @Test
    void theSystemPropertyWinsOverTheEnvironmentAndErrorsNameTheirSource() {
        Properties none = new Properties();
        Properties prop = new Properties();
        prop.setProperty(Settings.FAULT_PROPERTY.name(), "cut@rank=4");
        assertSame(FaultPlan.NONE, FaultPlan.from(Map.of(), none));
        assertEquals(4, FaultPlan.from(Map.of(Settings.FAULT.name(), "kill@rank=1"), prop).faults().get(0).rank());
        assertEquals(1, FaultPlan.from(Map.of(Settings.FAULT.name(), "kill@rank=1"), none).faults().get(0).rank());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> FaultPlan.from(Map.of(Settings.FAULT.name(), "kill@rank=x"), none));
        assertTrue(e.getMessage().startsWith("JCOMM_FAULT: fault 1"), e.getMessage());
        prop.setProperty(Settings.FAULT_PROPERTY.name(), "kil@rank=1");
        e = assertThrows(IllegalArgumentException.class, () -> FaultPlan.from(Map.of(), prop));
        assertTrue(e.getMessage().startsWith("-Djcomm.fault: fault 1"), e.getMessage());
    }

    @Test
    void groupsMatchExactlyOrByGlobAndOnlyOnTheirRank() {
        Fault exact = FaultPlan.parse("kill@rank=1,group=tp:0").faults().get(0);
        assertTrue(exact.targets("tp:0", 1));
        assertFalse(exact.targets("tp:0", 0));
        assertFalse(exact.targets("tp:01", 1));
        assertFalse(exact.targets("xtp:0", 1));
        Fault glob = FaultPlan.parse("kill@rank=1,group=tp:*").faults().get(0);
        assertTrue(glob.targets("tp:0", 1));
        assertTrue(glob.targets("tp:", 1));
        assertFalse(glob.targets("pp:0", 1));
        Fault middle = FaultPlan.parse("kill@rank=1,group=*:1*").faults().get(0);
        assertTrue(middle.targets("dp:1", 1));
        assertTrue(middle.targets("g2/tp:12", 1));
        assertFalse(middle.targets("tp:0", 1));
        assertTrue(FaultPlan.parse("kill@rank=1").faults().get(0).targets("anything at all", 1));
        FaultPlan p = FaultPlan.parse("kill@rank=1,group=tp:*;cut@rank=1,group=world;stall:1s@rank=2,group=tp:0");
        assertEquals(List.of(p.faults().get(0)), p.targeting("tp:0", 1));
        assertEquals(List.of(p.faults().get(2)), p.targeting("tp:0", 2));
        assertEquals(List.of(), p.targeting("pp:0", 1));
    }

    @Test
    void operationsFireFromTheirSequenceNumberInTheirPhase() {
        Fault f = FaultPlan.parse("kill@rank=0,op=allReduce,seq=5").faults().get(0);
        assertFalse(f.firesAt("allReduce", 4, Phase.BEFORE));
        assertTrue(f.firesAt("allReduce", 5, Phase.BEFORE));
        assertTrue(f.firesAt("allReduce", 6, Phase.BEFORE), "at or after its number");
        assertFalse(f.firesAt("allReduce", 5, Phase.AFTER));
        assertFalse(f.firesAt("broadcast", 5, Phase.BEFORE));
        assertTrue(FaultPlan.parse("kill@rank=0").faults().get(0).firesAt("recvObject", 1, Phase.BEFORE));
    }

    @Test
    void theGroupOptionOverridesTheProcessPlan() {
        CpuGroupOptions.Builder b = CpuGroupOptions.builder().store(new InMemoryStore());
        assertEquals(FaultPlan.process(), b.build().fault());
        FaultPlan mine = FaultPlan.parse("stall:1s@rank=0,group=world");
        assertEquals(mine, b.fault(mine).build().fault());
        assertEquals(mine, b.build().toBuilder().build().fault());
        assertSame(FaultPlan.NONE, b.fault(FaultPlan.NONE).build().fault());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> CpuGroupOptions.builder().store(new InMemoryStore()).option(CpuGroupOptions.FAULT_OPTION, "kill").build());
        assertTrue(e.getMessage().startsWith("fault option: fault 1 'kill'"), e.getMessage());
    }

    /**
     * {@link FaultPlan#OPERATIONS} names every operation of a ProcessGroup (its async variant by its own name), but
     * {@code shrink}: it makes a successor group rather than running on this one.
     */
    @Test
    void operationNamesAreTheProcessGroupsOperations() {
        Set<String> ops = new TreeSet<>();
        for (Method m : ProcessGroup.class.getMethods()) {
            Class<?>[] p = m.getParameterTypes();
            if (p.length > 0 && p[p.length - 1] == Duration.class) {
                String n = m.getName();
                ops.add(n.endsWith("Async") ? n.substring(0, n.length() - "Async".length()) : n);
            }
        }
        assertTrue(ops.remove("shrink"), "shrink takes a deadline too");
        assertEquals(ops, new TreeSet<>(FaultPlan.OPERATIONS));
    }
}
