package io.jcomm.cpu.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;

/** A raw TCP connection for byte-exact protocol tests: write exact bytes, compare exact replies. */
final class RawConn implements AutoCloseable {

    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;

    RawConn(int port) throws IOException {
        socket = new Socket(InetAddress.getLoopbackAddress(), port);
        socket.setTcpNoDelay(true);
        socket.setSoTimeout(5000);
        in = socket.getInputStream();
        out = socket.getOutputStream();
    }

    /** Frame builder (little-endian, as torch sends). */
    static final class F {
        private final ByteArrayOutputStream b = new ByteArrayOutputStream();

        F u8(int v) {
            b.write(v);
            return this;
        }

        F u32(int v) {
            for (int i = 0; i < 4; i++) {
                b.write(v >>> (8 * i));
            }
            return this;
        }

        F u64(long v) {
            for (int i = 0; i < 8; i++) {
                b.write((int) (v >>> (8 * i)));
            }
            return this;
        }

        F str(String s) {
            return str(s.getBytes(StandardCharsets.UTF_8));
        }

        F str(byte[] s) {
            u64(s.length);
            b.write(s, 0, s.length);
            return this;
        }

        F raw(byte[] s) {
            b.write(s, 0, s.length);
            return this;
        }

        byte[] bytes() {
            return b.toByteArray();
        }
    }

    static F f() {
        return new F();
    }

    static byte[] hex(String h) {
        return HexFormat.of().parseHex(h.replace(" ", ""));
    }

    RawConn send(F frame) throws IOException {
        return send(frame.bytes());
    }

    RawConn send(byte[] bytes) throws IOException {
        out.write(bytes);
        out.flush();
        return this;
    }

    byte[] read(int n) throws IOException {
        byte[] r = new byte[n];
        int off = 0;
        while (off < n) {
            int k = in.read(r, off, n - off);
            if (k < 0) {
                fail("connection closed after " + off + " of " + n + " expected bytes");
            }
            off += k;
        }
        return r;
    }

    /** Reads exactly {@code expected.length} bytes and compares them. */
    RawConn expect(byte[] expected) throws IOException {
        byte[] got = read(expected.length);
        assertArrayEquals(expected, got, () -> "expected " + HexFormat.of().formatHex(expected) + " got "
                + HexFormat.of().formatHex(got));
        return this;
    }

    RawConn expect(F frame) throws IOException {
        return expect(frame.bytes());
    }

    /** Asserts that nothing arrives within {@code ms}. */
    RawConn expectSilence(int ms) throws IOException {
        socket.setSoTimeout(ms);
        try {
            int b = in.read();
            fail(b < 0 ? "connection closed; expected it open and silent" : "unexpected byte " + b);
        } catch (SocketTimeoutException expected) {
            // silence
        } finally {
            socket.setSoTimeout(5000);
        }
        return this;
    }

    /** Asserts that the server closes the connection (after any bytes listed). */
    void expectClosed() throws IOException {
        try {
            int b = in.read();
            assertEquals(-1, b, "expected the server to close the connection");
        } catch (IOException e) {
            // connection reset also means closed
            if (e instanceof SocketTimeoutException) {
                throw e;
            }
        }
    }

    /** Closes with a TCP reset (SO_LINGER 0), like a process whose socket is torn down. */
    void reset() throws IOException {
        socket.setSoLinger(true, 0);
        socket.close();
    }

    @Override
    public void close() throws IOException {
        socket.close();
    }
}
