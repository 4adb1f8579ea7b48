package io.jcomm.transfer.internal;

/** Agent names: 1 to {@value #MAX_LENGTH} characters of {@code [A-Za-z0-9_.:-]} (they are parts of store keys). */
public final class Names {

    public static final int MAX_LENGTH = 128;

    private Names() {
    }

    /** Null if {@code name} is a valid agent name, else what is wrong with it. */
    public static String problem(String name) {
        if (name == null || name.isEmpty()) {
            return "an agent name must not be empty";
        }
        if (name.length() > MAX_LENGTH) {
            return "an agent name has at most " + MAX_LENGTH + " characters, got " + name.length();
        }
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            boolean ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
                    || c == '_' || c == '.' || c == ':' || c == '-';
            if (!ok) {
                return "an agent name may only hold [A-Za-z0-9_.:-], got character " + (int) c + " at " + i;
            }
        }
        return null;
    }
}
