package io.jcomm.cpu.store;

import java.util.Random;

/** Hostile TCPStore frames for fuzz tests (also used by the integration tests). */
public final class StoreFuzz {

    private StoreFuzz() {
    }

    /** A mostly-plausible frame, then damaged: random bytes, corrupted lengths, truncation. */
    public static byte[] hostileFrame(Random r, int maxKeyBytes) {
        RawConn.F f = RawConn.f();
        int kind = r.nextInt(8);
        boolean v2 = r.nextBoolean();
        if (v2) {
            f.raw(RawConn.hex("00 CE F7 85 3C"));
        }
        switch (kind) {
            case 0: { // pure noise
                byte[] b = new byte[1 + r.nextInt(64)];
                r.nextBytes(b);
                f.raw(b);
                break;
            }
            case 1: // huge declared length
                f.u8(r.nextInt(14)).u64(r.nextLong());
                break;
            case 2: // declared length just over a limit
                f.u8(v2 ? 1 : 0).u64(maxKeyBytes + 1 + r.nextInt(1000));
                break;
            case 3: // declared count over the limit
                f.u8(v2 ? 6 : 5).u64(128L * 1024 + 1 + r.nextInt(1 << 20));
                break;
            default: { // a valid frame of random type, then truncated or with one byte flipped
                int op = r.nextInt(v2 ? 14 : 12);
                f.u8(op);
                int fields = 1 + r.nextInt(4);
                for (int i = 0; i < fields; i++) {
                    if (r.nextInt(4) == 0) {
                        f.u64(r.nextInt(4)); // a small count
                    } else {
                        byte[] s = new byte[r.nextInt(40)];
                        r.nextBytes(s);
                        f.str(s);
                    }
                }
                byte[] b = f.bytes();
                if (r.nextBoolean() && b.length > 1) {
                    byte[] t = new byte[1 + r.nextInt(b.length - 1)];
                    System.arraycopy(b, 0, t, 0, t.length);
                    return t;
                }
                b[r.nextInt(b.length)] ^= (byte) (1 + r.nextInt(255));
                return b;
            }
        }
        return f.bytes();
    }
}
