package io.jcomm.transfer.internal;

import io.jcomm.api.ProtocolException;
import io.jcomm.transfer.spi.PeerInfo;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The store value of an agent: {@code [version u8][name][hostId][count u8] ([transport][endpoint])*},
 * every string and endpoint length-prefixed (u16) and bounded, decoded without trusting a byte.
 */
public final class PeerRecords {

    public static final int VERSION = 1;
    public static final int MAX_STRING = 256;
    public static final int MAX_ENDPOINT = 1024;
    public static final int MAX_TRANSPORTS = 16;

    private PeerRecords() {
    }

    public static byte[] encode(PeerInfo p) {
        ByteBuffer b = ByteBuffer.allocate(8 + 2 * (MAX_STRING + 2) + MAX_TRANSPORTS * (MAX_STRING + MAX_ENDPOINT + 4))
                .order(ByteOrder.LITTLE_ENDIAN);
        b.put((byte) VERSION);
        putString(b, p.name());
        putString(b, p.hostId());
        b.put((byte) p.endpoints().size());
        for (Map.Entry<String, byte[]> e : p.endpoints().entrySet()) {
            putString(b, e.getKey());
            if (e.getValue().length > MAX_ENDPOINT) {
                throw new IllegalArgumentException("endpoint of " + e.getKey() + " over " + MAX_ENDPOINT + " bytes");
            }
            b.putShort((short) e.getValue().length).put(e.getValue());
        }
        byte[] out = new byte[b.position()];
        b.flip().get(out);
        return out;
    }

    public static PeerInfo decode(byte[] bytes) {
        if (bytes.length > 8 + 2 * (MAX_STRING + 2) + MAX_TRANSPORTS * (MAX_STRING + MAX_ENDPOINT + 4)) {
            throw new ProtocolException("agent record of " + bytes.length + " bytes is too large");
        }
        try {
            ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
            if (b.get() != VERSION) {
                throw new ProtocolException("agent record of another version");
            }
            String name = getString(b);
            String problem = Names.problem(name);
            if (problem != null) {
                throw new ProtocolException("agent record: " + problem);
            }
            String host = getString(b);
            int n = b.get() & 0xff;
            if (n > MAX_TRANSPORTS) {
                throw new ProtocolException("agent record with " + n + " transports");
            }
            Map<String, byte[]> eps = new LinkedHashMap<>();
            for (int i = 0; i < n; i++) {
                String t = getString(b);
                int len = b.getShort() & 0xffff;
                if (len > MAX_ENDPOINT) {
                    throw new ProtocolException("agent record endpoint of " + len + " bytes");
                }
                byte[] ep = new byte[len];
                b.get(ep);
                eps.put(t, ep);
            }
            if (b.hasRemaining()) {
                throw new ProtocolException("agent record with " + b.remaining() + " trailing bytes");
            }
            return new PeerInfo(name, host, eps);
        } catch (BufferUnderflowException e) {
            throw new ProtocolException("truncated agent record");
        }
    }

    private static void putString(ByteBuffer b, String s) {
        byte[] u = s.getBytes(StandardCharsets.UTF_8);
        if (u.length > MAX_STRING) {
            throw new IllegalArgumentException("string over " + MAX_STRING + " bytes");
        }
        b.putShort((short) u.length).put(u);
    }

    static String getString(ByteBuffer b) {
        int len = b.getShort() & 0xffff;
        if (len > MAX_STRING || len > b.remaining()) {
            throw new ProtocolException("string of " + len + " bytes in an agent record");
        }
        byte[] u = new byte[len];
        b.get(u);
        return new String(u, StandardCharsets.UTF_8);
    }
}
