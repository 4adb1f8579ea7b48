package io.jcomm.tools.run;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.List;
import org.junit.jupiter.api.Test;

class CpuBindingTest {

    @Test
    void kernelListsAreParsed() {
        assertEquals(List.of(0, 1, 2, 3, 6, 8, 9), CpuBinding.parseList("0-3,6,8-9"));
        assertEquals(List.of(5), CpuBinding.parseList("5"));
        assertEquals(List.of(), CpuBinding.parseList(""));
        assertFalse(CpuBinding.allowed().isEmpty(), "this Linux process has a CPU list");
    }

    @Test
    void workersThatFitGetDisjointContiguousSlicesAndMoreWorkersThanCpusGetNone() {
        List<Integer> cpus = List.of(0, 1, 2, 3, 4, 5, 6, 7, 8, 9);
        assertEquals(List.of(0, 1, 2, 3), CpuBinding.slice(0, 3, cpus)); // 10 = 4 + 3 + 3
        assertEquals(List.of(4, 5, 6), CpuBinding.slice(1, 3, cpus));
        assertEquals(List.of(7, 8, 9), CpuBinding.slice(2, 3, cpus));
        assertEquals(List.of(1), CpuBinding.slice(1, 2, List.of(0, 1)));
        assertEquals(List.of(), CpuBinding.slice(0, 4, List.of(0, 1)));
        assertEquals(List.of("/usr/bin/taskset", "-c", "4,5,6"), CpuBinding.prefix(1, 3, cpus, "/usr/bin/taskset"));
        assertEquals(List.of(), CpuBinding.prefix(1, 3, cpus, null), "no taskset, no binding");
        assertEquals(List.of(), CpuBinding.prefix(0, 3, List.of(), "/usr/bin/taskset"), "--cpu-bind none");
    }
}
