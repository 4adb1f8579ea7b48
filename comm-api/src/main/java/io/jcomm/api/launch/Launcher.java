package io.jcomm.api.launch;

import java.util.Map;
import java.util.Optional;

/**
 * One kind of launcher (a scheduler, an MPI runtime, a Kubernetes controller) and how to read what it
 * sets in a process's environment. Implementations are pure functions of the environment; the order in
 * which they are tried, and how their answers are combined, is {@link Launchers}'s.
 */
public interface Launcher {

    /** The name {@code JCOMM_LAUNCHER} selects this launcher by (lower case). */
    String name();

    /**
     * What this launcher's variables in {@code env} say, or empty when they are absent.
     *
     * @throws IllegalArgumentException naming the variable when one of them is present but malformed
     */
    Optional<LaunchInfo> detect(Map<String, String> env);
}
