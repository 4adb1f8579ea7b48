package io.jcomm.tools.run;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

class WorkerJitTest {

    @Test
    void workersCompileLaterOnlyWhenTheyOutnumberHalfTheCpus() {
        assertEquals(List.of(WorkerJit.FLAG), WorkerJit.jvmArgs(4, 2));
        assertEquals(List.of(WorkerJit.FLAG), WorkerJit.jvmArgs(2, 2));
        assertEquals(List.of(WorkerJit.FLAG), WorkerJit.jvmArgs(1, 1));
        assertEquals(List.of(WorkerJit.FLAG), WorkerJit.jvmArgs(8, 15));
        assertEquals(List.of(), WorkerJit.jvmArgs(8, 16));
        assertEquals(List.of(), WorkerJit.jvmArgs(4, 16));
        assertEquals(List.of(), WorkerJit.jvmArgs(1, 2));
        assertEquals("-XX:CompileThresholdScaling=2", WorkerJit.FLAG);
    }

    @Test
    void theUsersJvmArgumentsComeAfterTheLaunchersAndWin() {
        RunPlan plan = RunPlan.builder().nprocPerNode(2).mainClass("x.Main").classPath("/a.jar")
                .jvmArgs(List.of("-XX:CompileThresholdScaling=1")).build();
        List<String> cmd = plan.workerCommand(0, WorkerJit.jvmArgs(2, 2));
        assertEquals(cmd.indexOf(WorkerJit.FLAG) + 1, cmd.indexOf("-XX:CompileThresholdScaling=1"), cmd.toString());
    }
}
