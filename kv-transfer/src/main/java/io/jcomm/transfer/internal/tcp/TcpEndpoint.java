package io.jcomm.transfer.internal.tcp;

import io.jcomm.api.ProtocolException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The tcp transport's published endpoint: {@code port u16, hostLength u16, host (UTF-8)}.
 *
 * @param host the address peers connect to
 * @param port the port
 */
public record TcpEndpoint(String host, int port) {

    public static final int MAX_HOST = 255;

    public byte[] encode() {
        byte[] h = host.getBytes(StandardCharsets.UTF_8);
        if (h.length == 0 || h.length > MAX_HOST) {
            throw new IllegalArgumentException("host of " + h.length + " bytes");
        }
        return ByteBuffer.allocate(4 + h.length).order(ByteOrder.LITTLE_ENDIAN).putShort((short) port)
                .putShort((short) h.length).put(h).array();
    }

    /** Decodes an endpoint, checking every length. */
    public static TcpEndpoint decode(byte[] ep, String agent) {
        if (ep.length < 5 || ep.length > 4 + MAX_HOST) {
            throw new ProtocolException("tcp endpoint of agent " + agent + " has " + ep.length + " bytes");
        }
        ByteBuffer b = ByteBuffer.wrap(ep).order(ByteOrder.LITTLE_ENDIAN);
        int port = b.getShort() & 0xffff;
        int hl = b.getShort() & 0xffff;
        if (hl != ep.length - 4 || port == 0) {
            throw new ProtocolException("tcp endpoint of agent " + agent + " is malformed");
        }
        return new TcpEndpoint(new String(ep, 4, hl, StandardCharsets.UTF_8), port);
    }
}
