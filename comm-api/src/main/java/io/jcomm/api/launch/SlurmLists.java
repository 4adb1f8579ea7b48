package io.jcomm.api.launch;

import java.util.ArrayList;
import java.util.List;

/**
 * Slurm's compressed lists, as {@code srun} writes them into a task's environment: host lists
 * ({@code SLURM_STEP_NODELIST}: {@code n1}, {@code n[1-3]}, {@code gpu[01-02,07]}, {@code a[1-2]-ib,b3},
 * {@code r[1-2]-n[01-02]}) and tasks per node ({@code SLURM_STEP_TASKS_PER_NODE}: {@code 4},
 * {@code 2(x3),1}). Both come from the environment, so every count is bounded before anything is
 * allocated: a list that expands to more than {@value #MAX_ENTRIES} entries is refused.
 */
final class SlurmLists {

    /** The most entries an expanded list may have (far beyond any cluster). */
    static final int MAX_ENTRIES = 1 << 20;

    private SlurmLists() {
    }

    /**
     * Every host of a compressed host list, in Slurm's order: top-level commas separate items, a bracket
     * holds comma-separated numbers and ranges whose lower bound's width sets the zero padding, several
     * brackets in one item multiply, and text after a bracket is a suffix.
     *
     * @throws IllegalArgumentException naming the list when it is malformed or too long
     */
    static List<String> expandHosts(String list) {
        List<String> out = new ArrayList<>();
        for (String item : splitTopLevel(list)) {
            if (item.isEmpty()) {
                throw new IllegalArgumentException("empty host in the Slurm host list '" + list + "'");
            }
            expandItem(list, item, "", out);
        }
        if (out.isEmpty()) {
            throw new IllegalArgumentException("the Slurm host list is empty");
        }
        return out;
    }

    /** The first host of a compressed host list (expands only what it needs). */
    static String firstHost(String list) {
        List<String> items = splitTopLevel(list);
        if (items.isEmpty() || items.get(0).isEmpty()) {
            throw new IllegalArgumentException("the Slurm host list '" + list + "' has no first host");
        }
        StringBuilder sb = new StringBuilder();
        String rest = items.get(0);
        while (true) {
            int open = rest.indexOf('[');
            if (open < 0) {
                checkPlain(list, rest);
                return sb.append(rest).toString();
            }
            int close = rest.indexOf(']', open);
            if (close < 0) {
                throw new IllegalArgumentException("unclosed '[' in the Slurm host list '" + list + "'");
            }
            checkPlain(list, rest.substring(0, open));
            sb.append(rest, 0, open);
            String first = rest.substring(open + 1, close).split(",", -1)[0];
            int dash = first.indexOf('-');
            String lo = dash < 0 ? first : first.substring(0, dash);
            parseBound(list, lo);
            sb.append(lo);
            rest = rest.substring(close + 1);
        }
    }

    /**
     * Tasks of each node of a step, in node order: {@code 2(x3),1} is {@code [2, 2, 2, 1]}.
     *
     * @throws IllegalArgumentException naming the value when it is malformed or too long
     */
    static int[] expandTasksPerNode(String value) {
        List<Integer> out = new ArrayList<>();
        for (String item : value.trim().split(",", -1)) {
            String s = item.trim();
            int repeat = 1;
            int paren = s.indexOf('(');
            if (paren >= 0) {
                if (!s.endsWith(")") || !s.startsWith("x", paren + 1)) {
                    throw new IllegalArgumentException("malformed Slurm tasks-per-node item '" + s + "' in '" + value + "'");
                }
                repeat = parseCount(value, s.substring(paren + 2, s.length() - 1));
                s = s.substring(0, paren);
            }
            int tasks = parseCount(value, s);
            if ((long) out.size() + repeat > MAX_ENTRIES) {
                throw new IllegalArgumentException("the Slurm tasks-per-node list '" + value + "' names more than "
                        + MAX_ENTRIES + " nodes");
            }
            for (int i = 0; i < repeat; i++) {
                out.add(tasks);
            }
        }
        int[] a = new int[out.size()];
        for (int i = 0; i < a.length; i++) {
            a[i] = out.get(i);
        }
        return a;
    }

    private static int parseCount(String value, String s) {
        try {
            int n = Integer.parseInt(s.trim());
            if (n >= 1) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException("'" + s + "' is not a positive count in the Slurm tasks-per-node list '"
                + value + "'");
    }

    private static List<String> splitTopLevel(String list) {
        List<String> items = new ArrayList<>();
        int depth = 0;
        int start = 0;
        for (int i = 0; i < list.length(); i++) {
            char c = list.charAt(i);
            if (c == '[') {
                if (++depth > 1) {
                    throw new IllegalArgumentException("nested '[' in the Slurm host list '" + list + "'");
                }
            } else if (c == ']') {
                if (--depth < 0) {
                    throw new IllegalArgumentException("unmatched ']' in the Slurm host list '" + list + "'");
                }
            } else if (c == ',' && depth == 0) {
                items.add(list.substring(start, i).trim());
                start = i + 1;
            }
        }
        if (depth != 0) {
            throw new IllegalArgumentException("unclosed '[' in the Slurm host list '" + list + "'");
        }
        items.add(list.substring(start).trim());
        return items;
    }

    private static void expandItem(String list, String rest, String prefix, List<String> out) {
        int open = rest.indexOf('[');
        if (open < 0) {
            checkPlain(list, rest);
            if (out.size() >= MAX_ENTRIES) {
                throw new IllegalArgumentException("the Slurm host list '" + list + "' names more than " + MAX_ENTRIES
                        + " hosts");
            }
            out.add(prefix + rest);
            return;
        }
        int close = rest.indexOf(']', open);
        checkPlain(list, rest.substring(0, open));
        String head = prefix + rest.substring(0, open);
        String tail = rest.substring(close + 1);
        for (String range : rest.substring(open + 1, close).split(",", -1)) {
            String r = range.trim();
            int dash = r.indexOf('-');
            String loText = dash < 0 ? r : r.substring(0, dash);
            long lo = parseBound(list, loText);
            long hi = dash < 0 ? lo : parseBound(list, r.substring(dash + 1));
            if (hi < lo) {
                throw new IllegalArgumentException("descending range '" + r + "' in the Slurm host list '" + list + "'");
            }
            if (hi - lo >= MAX_ENTRIES - out.size()) {
                throw new IllegalArgumentException("the Slurm host list '" + list + "' names more than " + MAX_ENTRIES
                        + " hosts");
            }
            int width = loText.length();
            for (long v = lo; v <= hi; v++) {
                String n = Long.toString(v);
                StringBuilder sb = new StringBuilder(head);
                for (int pad = n.length(); pad < width; pad++) {
                    sb.append('0');
                }
                expandItem(list, tail, sb.append(n).toString(), out);
            }
        }
    }

    private static long parseBound(String list, String s) {
        if (s.isEmpty() || s.length() > 18) {
            throw new IllegalArgumentException("bad number '" + s + "' in the Slurm host list '" + list + "'");
        }
        for (int i = 0; i < s.length(); i++) {
            if (s.charAt(i) < '0' || s.charAt(i) > '9') {
                throw new IllegalArgumentException("bad number '" + s + "' in the Slurm host list '" + list + "'");
            }
        }
        return Long.parseLong(s);
    }

    private static void checkPlain(String list, String s) {
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == ']' || c == '[' || Character.isWhitespace(c)) {
                throw new IllegalArgumentException("unexpected '" + c + "' in the Slurm host list '" + list + "'");
            }
        }
    }
}
