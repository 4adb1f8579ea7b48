package io.jcomm.api;

import java.util.Objects;
import java.util.regex.Pattern;

/**
 * Where a tensor's memory lives: {@code cpu}, {@code cuda:N}, or a vendor's {@code type:N}
 * (for example {@code npu:0}). Immutable value.
 *
 * @param type  lower-case device type, e.g. {@code cpu}, {@code cuda}, {@code npu}
 * @param index device ordinal, or {@code -1} for {@code cpu} (which has no ordinal)
 */
public record Device(String type, int index) {

    private static final Pattern TYPE = Pattern.compile("[a-z][a-z0-9_]{0,31}");

    /** The host. */
    public static final Device CPU = new Device("cpu", -1);

    public Device {
        Objects.requireNonNull(type, "type");
        if (!TYPE.matcher(type).matches()) {
            throw new IllegalArgumentException("bad device type '" + type + "'");
        }
        if (type.equals("cpu") ? index != -1 : index < 0) {
            throw new IllegalArgumentException("bad device index " + index + " for type " + type);
        }
    }

    public static Device cpu() {
        return CPU;
    }

    public static Device cuda(int index) {
        return new Device("cuda", index);
    }

    public static Device of(String type, int index) {
        return "cpu".equals(type) ? CPU : new Device(type, index);
    }

    /**
     * Parses {@code cpu}, {@code cuda}, {@code cuda:1}, {@code npu:0}. A missing index means 0
     * (except for {@code cpu}).
     */
    public static Device parse(String spec) {
        String s = spec.trim();
        int colon = s.indexOf(':');
        if (colon < 0) {
            return s.equals("cpu") ? CPU : new Device(s, 0);
        }
        String type = s.substring(0, colon);
        int idx;
        try {
            idx = Integer.parseInt(s.substring(colon + 1));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("bad device '" + spec + "'", e);
        }
        if (type.equals("cpu") && idx == 0) {
            return CPU;
        }
        return new Device(type, idx);
    }

    public boolean isCpu() {
        return type.equals("cpu");
    }

    /*
     * equals and hashCode by hand, with the record's own meaning: the generated ones link through
     * java.lang.runtime.ObjectMethods at their first call, which took ~40 ms in a fresh JVM here, and
     * the first device operation of every rank compares devices.
     */

    @Override
    public boolean equals(Object o) {
        return o == this || o instanceof Device d && index == d.index && type.equals(d.type);
    }

    @Override
    public int hashCode() {
        return 31 * type.hashCode() + index;
    }

    @Override
    public String toString() {
        return isCpu() ? "cpu" : type + ":" + index;
    }
}
