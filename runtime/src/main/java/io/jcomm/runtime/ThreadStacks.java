package io.jcomm.runtime;

/** Stack traces of this JVM's threads by name, for the messages of timeouts and stalls. */
public final class ThreadStacks {

    private static final int MAX_FRAMES = 25;

    private ThreadStacks() {
    }

    /** The stacks (at most 25 frames each) of the threads whose names start with one of {@code prefixes}. */
    public static String of(String... prefixes) {
        StringBuilder sb = new StringBuilder();
        Thread.getAllStackTraces().forEach((t, st) -> {
            for (String p : prefixes) {
                if (t.getName().startsWith(p)) {
                    sb.append("--- ").append(t.getName()).append(" (").append(t.getState()).append(")\n");
                    for (int i = 0; i < Math.min(st.length, MAX_FRAMES); i++) {
                        sb.append("    at ").append(st[i]).append('\n');
                    }
                    return;
                }
            }
        });
        return sb.toString();
    }
}
