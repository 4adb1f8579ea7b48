package io.jcomm.cpu.codec;

import io.jcomm.api.ObjectCodec;
import io.jcomm.api.ProtocolException;
import io.jcomm.runtime.Fnv1a;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.apache.fory.Fory;
import org.apache.fory.ThreadSafeFory;
import org.apache.fory.config.Language;
import org.apache.fory.memory.MemoryBuffer;

/**
 * The SDK's {@link ObjectCodec}: Apache Fory with class registration required.
 *
 * <p>Applications register their types on the {@link Builder}. Registration ids are assigned in
 * the order of the sorted class names, so every process that registers the same set of classes
 * (in any order) agrees on the ids; {@link #fingerprint()} summarises the set so that groups can
 * check agreement at creation. Fory's own built-in types (strings, boxed primitives, primitive
 * arrays, common collections) need no registration.
 *
 * <p>Decoding is hardened: unknown classes are rejected rather than materialised, nesting depth and
 * graph memory are bounded, and the decoded value must be an instance of the expected type; every
 * failure is a {@link ProtocolException}. A value that cannot be encoded (a type not registered) is
 * an {@link IllegalArgumentException}: the caller's value, not bytes from a peer. Thread safe.
 *
 * <p>Fory itself is made at the first {@link #encode} or {@link #decode} that needs it, not by
 * {@link Builder#build()}: making it loads about a thousand classes (0.6 s of a cold JVM's CPU, compilers
 * included, on the 2-core development machine). The values metadata is made of (null, strings, boxed
 * primitives, primitive arrays) never need it: they have a compact form of their own.
 *
 * <h2>Wire format</h2>
 * One byte names the form, the payload follows: {@code 0} Fory's bytes; {@code 1} null; {@code 2} a string
 * in UTF-8; {@code 3..10} a {@code Long}, {@code Integer}, {@code Double}, {@code Float}, {@code Boolean}
 * (one byte, 0 or 1), {@code Short}, {@code Byte} or {@code Character}; {@code 11..15} a {@code byte[]},
 * {@code long[]}, {@code int[]}, {@code double[]} or {@code float[]}; numbers little-endian, a payload's
 * length exactly what its form needs.
 */
public final class ForyCodec implements ObjectCodec {

    /** First registration id used for application classes. */
    public static final int FIRST_USER_ID = 256;
    /** The encoding's version, part of {@link #fingerprint()}. */
    static final String WIRE_FORMAT = "jcomm-codec-2";
    /** Maximum nesting depth of a decoded object graph. */
    public static final int MAX_DEPTH = 64;

    private final List<Class<?>> registered;
    private final String fingerprint;
    private final long maxGraphBytes;
    private final boolean codegen;
    /** Made at first use ({@link #fory()}). */
    private volatile ThreadSafeFory fory;

    private ForyCodec(Builder b) {
        List<Class<?>> sorted = new ArrayList<>(b.types);
        sorted.sort(Comparator.comparing(Class::getName));
        this.registered = List.copyOf(sorted);
        this.maxGraphBytes = b.maxGraphBytes;
        this.codegen = b.codegen;
        this.fingerprint = digest(registered);
    }

    /** The Fory instance, made (with the registrations) by the first caller. */
    private ThreadSafeFory fory() {
        ThreadSafeFory f = fory;
        if (f == null) {
            synchronized (this) {
                f = fory;
                if (f == null) {
                    f = Fory.builder()
                            .withLanguage(Language.JAVA)
                            .requireClassRegistration(true)
                            .withDeserializeUnknownClass(false)
                            .withRefTracking(false)
                            .withMaxDepth(MAX_DEPTH)
                            .withMaxGraphMemoryBytes(maxGraphBytes)
                            .withCodegen(codegen)
                            .suppressClassRegistrationWarnings(true)
                            .buildThreadSafeFory();
                    int id = FIRST_USER_ID;
                    for (Class<?> c : registered) {
                        f.register(c, id++);
                    }
                    fory = f;
                }
            }
        }
        return f;
    }

    /** Whether Fory has been made (tests: values with a form of their own never make it). */
    boolean foryMade() {
        return fory != null;
    }

    /**
     * The registrations' fingerprint: 64-bit FNV-1a over the wire format's version and the sorted class
     * names, in 16 hex digits. It only has to tell builds or registrations apart that differ by accident
     * (a peer could send any fingerprint it liked), so it needs no digest and none of the JDK's security
     * providers, whose set-up every rank paid before its groups were ready.
     */
    private static String digest(List<Class<?>> classes) {
        long h = Fnv1a.update(Fnv1a.EMPTY, WIRE_FORMAT.getBytes(StandardCharsets.UTF_8));
        h = Fnv1a.update(h, (byte) 0);
        for (Class<?> c : classes) {
            h = Fnv1a.update(h, c.getName().getBytes(StandardCharsets.UTF_8));
            h = Fnv1a.update(h, (byte) 0);
        }
        return Fnv1a.hex(h);
    }

    /** A codec with no application types (built-in types only). */
    public static ForyCodec defaults() {
        return builder().build();
    }

    public static Builder builder() {
        return new Builder();
    }

    @Override
    public int registeredTypeCount() {
        return registered.size();
    }

    /** The application classes registered, in id order. */
    public List<Class<?>> registeredTypes() {
        return registered;
    }

    /**
     * A short hash of the encoding's version and the registered class names; equal on every process of the
     * same jcomm encoding with the same registrations.
     */
    @Override
    public java.util.Optional<String> fingerprint() {
        return java.util.Optional.of(fingerprint);
    }

    @Override
    public byte[] encode(Object value) {
        byte[] own = Scalars.encode(value);
        if (own != null) {
            return own;
        }
        ThreadSafeFory f = fory();
        try {
            // the form byte, then Fory's bytes written after it in the same buffer (no second copy)
            MemoryBuffer out = MemoryBuffer.newHeapBuffer(64);
            out.writeByte(Scalars.FORY);
            f.serialize(out, value);
            return out.getBytes(0, out.writerIndex());
        } catch (RuntimeException e) {
            throw new IllegalArgumentException("cannot encode " + (value == null ? "null" : value.getClass().getName())
                    + " (is the type registered with the codec?): " + e.getMessage(), e);
        }
    }

    @Override
    public <T> T decode(byte[] bytes, int offset, int length, Class<T> expected) {
        if (offset < 0 || length < 0 || offset > bytes.length - length) {
            throw new IllegalArgumentException("decode range [" + offset + ", +" + length + ") outside " + bytes.length
                    + " bytes");
        }
        if (length == 0) {
            throw new ProtocolException("cannot decode an empty payload");
        }
        Object v;
        if (bytes[offset] != Scalars.FORY) {
            v = Scalars.decode(bytes, offset, length);
        } else {
            if (length == 1) {
                throw new ProtocolException("cannot decode an empty payload");
            }
            ThreadSafeFory f = fory();
            try {
                v = f.deserialize(MemoryBuffer.fromByteArray(bytes, offset + 1, length - 1));
            } catch (RuntimeException | StackOverflowError e) {
                throw new ProtocolException("malformed or unregistered payload of " + length + " bytes: " + e);
            }
        }
        if (v != null && !expected.isInstance(v)) {
            throw new ProtocolException("expected " + expected.getName() + " but decoded " + v.getClass().getName());
        }
        return expected.cast(v);
    }

    /** Registers application types; build once, share everywhere (the codec is thread safe). */
    public static final class Builder {
        private final Set<Class<?>> types = new LinkedHashSet<>();
        private long maxGraphBytes = 256L << 20;
        private boolean codegen = false;

        private Builder() {
        }

        /** Registers classes (records, enums, plain classes with a no-arg or canonical constructor). */
        public Builder register(Class<?>... classes) {
            for (Class<?> c : classes) {
                types.add(c);
            }
            return this;
        }

        /** Upper bound on memory a decoded graph may claim (default 256 MiB). */
        public Builder maxGraphBytes(long bytes) {
            this.maxGraphBytes = bytes;
            return this;
        }

        /** Use Fory's generated serializers (faster steady state, slower first use; default off). */
        public Builder codegen(boolean on) {
            this.codegen = on;
            return this;
        }

        public ForyCodec build() {
            return new ForyCodec(this);
        }
    }
}
