package io.jcomm.transfer;

import java.util.EnumSet;
import java.util.Set;

/** What a remote agent may do with a registered region. The owner checks it on every transfer. */
public enum Permission {
    /** Remote agents may read the region ({@link TransferAgent#read}). */
    READ(1),
    /** Remote agents may write the region ({@link TransferAgent#write}). */
    WRITE(2);

    /** Every bit a permission set may carry on the wire. */
    public static final int ALL_BITS = 3;

    private final int bit;

    Permission(int bit) {
        this.bit = bit;
    }

    /** The wire bit of this permission. */
    public int bit() {
        return bit;
    }

    /** The wire bits of {@code permissions}. */
    public static int bits(Set<Permission> permissions) {
        int b = 0;
        for (Permission p : permissions) {
            b |= p.bit;
        }
        return b;
    }

    /** The permissions of {@code bits}; bits outside {@link #ALL_BITS} are the caller's to refuse. */
    public static Set<Permission> of(int bits) {
        EnumSet<Permission> s = EnumSet.noneOf(Permission.class);
        for (Permission p : values()) {
            if ((bits & p.bit) != 0) {
                s.add(p);
            }
        }
        return s;
    }
}
