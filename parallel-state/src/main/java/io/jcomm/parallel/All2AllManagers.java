package io.jcomm.parallel;

import io.jcomm.runtime.Providers;
import io.jcomm.api.config.Settings;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * Finds {@link All2AllManager}s by name among the {@link All2AllManagerProvider}s a class loader
 * sees. Nothing is cached: each call scans the class path (a {@link ParallelState} selects once).
 */
public final class All2AllManagers {

    /** Name of the default manager (vLLM's default): all-gather in dispatch, reduce-scatter in combine. */
    public static final String ALLGATHER_REDUCESCATTER = "allgather-reducescatter";
    /** Name of the all-to-all manager: token counts, then {@code allToAllV} of the token copies. */
    public static final String ALLTOALL = "alltoall";

    private All2AllManagers() {
    }

    /** The providers {@code loader} sees, by name. */
    public static Map<String, All2AllManagerProvider> providers(ClassLoader loader) {
        Providers<All2AllManagerProvider> found = Providers.load(All2AllManagerProvider.class, loader);
        if (!found.errors().isEmpty()) {
            throw new IllegalStateException("all2all managers: " + String.join("; ", found.errors()));
        }
        Map<String, All2AllManagerProvider> byName = new TreeMap<>();
        for (All2AllManagerProvider p : found.all()) {
            byName.put(p.name(), p);
        }
        return byName;
    }

    /**
     * The manager named {@code name} (trimmed, case-insensitive); {@code null} or blank selects
     * {@link #ALLGATHER_REDUCESCATTER}.
     *
     * @throws IllegalArgumentException if no provider has that name (the message lists the known ones)
     */
    public static All2AllManager select(String name, ClassLoader loader) {
        String n = name == null || name.isBlank() ? ALLGATHER_REDUCESCATTER : name.trim().toLowerCase(Locale.ROOT);
        Map<String, All2AllManagerProvider> all = providers(loader);
        All2AllManagerProvider p = all.get(n);
        if (p == null) {
            throw new IllegalArgumentException("unknown all2all backend '" + name + "'; known: " + all.keySet());
        }
        All2AllManager m = Objects.requireNonNull(p.create(), () -> p.getClass().getName() + ".create() returned null");
        if (!m.name().equals(p.name())) {
            throw new IllegalStateException("provider '" + p.name() + "' made a manager named '" + m.name() + "'");
        }
        return m;
    }

    /**
     * The manager a job uses: {@code configured} when set, else the value of {@code JCOMM_ALL2ALL_BACKEND} in
     * {@code env}, else the default.
     */
    public static All2AllManager resolve(String configured, Map<String, String> env, ClassLoader loader) {
        String n = configured != null && !configured.isBlank() ? configured : Settings.ALL2ALL_BACKEND.value(env).orElse(null);
        return select(n, loader);
    }
}
