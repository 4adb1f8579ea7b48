package io.jcomm.tools.run;

import java.util.List;

/**
 * The JIT compiler's thresholds for commrun's workers when a node has more starting workers than CPUs
 * can keep up with: {@value #FLAG}, so each method is compiled after twice the usual number of calls
 * and loop iterations.
 *
 * <p>Why: a starting JVM keeps about two threads busy, its main thread and a compiler thread (C1 first,
 * C2 for the hottest methods). On a host with CPUs to spare the compilers run beside the workers'
 * start and cost it nothing. When {@code 2 * workers > CPUs}, for example 4 workers on the 2 CPUs of a
 * development machine, every compilation takes a CPU away from some worker's start. Half the
 * compilations until the groups are ready were of methods run a few hundred times and not again. With
 * the thresholds doubled, the 4-worker demo on 2 CPUs was ready in 0.60 s instead of 0.68 s, and its
 * ranks used 1.04 s of CPU instead of 1.17 s (8 rounds side by side, faster in all 8; see
 * {@code docs/PERFORMANCE.md}). The steady state is the same: the same methods are compiled, with
 * the same compilers, a little later (the demo's 1,000 steps after its warm-up ran at the same rate
 * either way).
 *
 * <p>This is torchrun's reasoning for {@code OMP_NUM_THREADS=1}: the launcher knows how many workers
 * share the node. As with that variable, the user decides last: the flag comes before the user's
 * {@code --jvm-arg}s on the worker's command line, so {@code --jvm-arg=-XX:CompileThresholdScaling=1}
 * restores the JVM's thresholds (the JVM takes the last value of a flag).
 */
final class WorkerJit {

    /** The flag given to oversubscribed workers. */
    static final String FLAG = "-XX:CompileThresholdScaling=2";

    private WorkerJit() {
    }

    /**
     * The JIT flags for {@code workers} workers on a node with {@code cpus} CPUs: {@link #FLAG} when
     * {@code 2 * workers > cpus}, none otherwise.
     */
    static List<String> jvmArgs(int workers, int cpus) {
        return 2L * workers > cpus ? List.of(FLAG) : List.of();
    }
}
