package io.jcomm.runtime;

import io.jcomm.api.Availability;
import io.jcomm.api.spi.Provider;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceConfigurationError;
import java.util.ServiceLoader;
import java.util.function.Predicate;

/**
 * The providers of one kind that a class loader sees, and the one rule every kind is chosen by: by name
 * (any case) when one is asked for, else the available provider with the highest priority, ties by name.
 * A provider that cannot be loaded or created does not hide the others: it is left out and reported in
 * {@link #errors()}; so is a second provider of a name already taken by another class (the same class
 * found twice, as with a jar twice on the class path, counts once).
 *
 * <p>An immutable snapshot; availability is each provider's own (which caches it).
 *
 * @param <P> the kind of provider
 */
public final class Providers<P extends Provider> {

    private static final Comparator<Provider> BEST_FIRST =
            Comparator.comparingInt(Provider::priority).reversed().thenComparing(Provider::name);

    private final List<P> all;
    private final List<String> errors;

    private Providers(Collection<P> found, List<String> errors) {
        List<P> sorted = new ArrayList<>(found);
        sorted.sort(BEST_FIRST);
        this.all = List.copyOf(sorted);
        this.errors = List.copyOf(errors);
    }

    /** The providers of {@code type} listed in {@code META-INF/services} files that {@code loader} sees. */
    public static <P extends Provider> Providers<P> load(Class<P> type, ClassLoader loader) {
        Map<String, P> found = new LinkedHashMap<>();
        List<String> errors = new ArrayList<>();
        var it = ServiceLoader.load(type, loader).stream().iterator();
        while (true) {
            ServiceLoader.Provider<P> p;
            try {
                if (!it.hasNext()) {
                    break;
                }
                p = it.next();
            } catch (ServiceConfigurationError | LinkageError e) {
                errors.add("bad provider configuration: " + e.getMessage());
                continue;
            }
            try {
                add(found, errors, p.get());
            } catch (ServiceConfigurationError | RuntimeException | LinkageError e) {
                errors.add(p.type().getName() + " could not be created: " + e);
            }
        }
        return new Providers<>(found.values(), errors);
    }

    /** Exactly these providers (tests, embedding), with the same rules for names. */
    public static <P extends Provider> Providers<P> of(Collection<? extends P> providers) {
        Map<String, P> found = new LinkedHashMap<>();
        List<String> errors = new ArrayList<>();
        for (P p : providers) {
            add(found, errors, p);
        }
        return new Providers<>(found.values(), errors);
    }

    private static <P extends Provider> void add(Map<String, P> found, List<String> errors, P p) {
        String name = p.name();
        if (name == null || name.isBlank()) {
            errors.add(p.getClass().getName() + " has no name; ignored");
            return;
        }
        P prev = found.putIfAbsent(name.toLowerCase(Locale.ROOT), p);
        if (prev != null && prev.getClass() != p.getClass()) {
            errors.add("provider name '" + name + "' of " + p.getClass().getName() + " is already taken by "
                    + prev.getClass().getName() + "; ignored");
        }
    }

    /** Every provider, highest priority first (ties by name). */
    public List<P> all() {
        return all;
    }

    /** What could not be loaded or was left out, one line each. */
    public List<String> errors() {
        return errors;
    }

    /** The provider called {@code name} (any case, trimmed), available or not. */
    public Optional<P> named(String name) {
        String n = name.trim().toLowerCase(Locale.ROOT);
        for (P p : all) {
            if (p.name().toLowerCase(Locale.ROOT).equals(n)) {
                return Optional.of(p);
            }
        }
        return Optional.empty();
    }

    /** The available provider of highest priority among those {@code which} accepts. */
    public Optional<P> best(Predicate<? super P> which) {
        for (P p : all) {
            if (which.test(p) && availabilityOf(p).available()) {
                return Optional.of(p);
            }
        }
        return Optional.empty();
    }

    /** Every available provider {@code which} accepts, highest priority first. */
    public List<P> available(Predicate<? super P> which) {
        List<P> out = new ArrayList<>();
        for (P p : all) {
            if (which.test(p) && availabilityOf(p).available()) {
                out.add(p);
            }
        }
        return List.copyOf(out);
    }

    /** {@code p}'s availability; a provider that throws or answers null is unavailable, saying so. */
    public static Availability availabilityOf(Provider p) {
        try {
            Availability a = p.availability();
            return a != null ? a : Availability.unavailable(p.getClass().getName() + ".availability() returned null");
        } catch (RuntimeException | LinkageError e) {
            return Availability.unavailable(p.getClass().getName() + ".availability() failed: " + e);
        }
    }

    /** One entry per provider {@code which} accepts: name, priority and availability ({@code (none)} when none). */
    public String describe(Predicate<? super P> which) {
        StringBuilder sb = new StringBuilder();
        for (P p : all) {
            if (which.test(p)) {
                sb.append(sb.length() == 0 ? "" : "; ").append(p.name()).append(" (priority ").append(p.priority())
                        .append(", ").append(availabilityOf(p)).append(')');
            }
        }
        return sb.length() == 0 ? "(none on the class path)" : sb.toString();
    }
}
