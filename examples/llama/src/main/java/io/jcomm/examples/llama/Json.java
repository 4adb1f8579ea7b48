package io.jcomm.examples.llama;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small, strict JSON parser (RFC 8259) for the two documents this example reads from outside: a
 * safetensors header and a Hugging Face {@code config.json} (and the torch reference's output in
 * tests). Objects become insertion-ordered {@code Map<String, Object>}, arrays {@code List<Object>},
 * numbers {@code Long} when integral and in range, else {@code Double}; strings, booleans and
 * {@code null} map to themselves. Unmodifiable results.
 *
 * <p>Hostile input fails with an {@link IllegalArgumentException} naming the offset: nesting deeper
 * than {@link #MAX_DEPTH}, duplicate keys (which safetensors forbids and which would let two readers
 * see different tensors), trailing bytes, bad escapes, lone surrogates and non-finite numbers.
 * Lengths are the caller's to bound before reading the text.
 */
final class Json {

    /** Deepest nesting accepted; a safetensors header needs 3, a config 3 or 4. */
    static final int MAX_DEPTH = 64;

    private final String s;
    private int i;

    private Json(String s) {
        this.s = s;
    }

    /** Parses one JSON value spanning all of {@code text} (whitespace around it allowed). */
    static Object parse(String text) {
        Json p = new Json(text);
        p.skipWhitespace();
        Object v = p.value(0);
        p.skipWhitespace();
        if (p.i != text.length()) {
            throw p.error("trailing characters after the JSON value");
        }
        return v;
    }

    /** Parses {@code text}, which must be a JSON object. */
    @SuppressWarnings("unchecked")
    static Map<String, Object> parseObject(String text) {
        Object v = parse(text);
        if (!(v instanceof Map)) {
            throw new IllegalArgumentException("expected a JSON object, got " + typeName(v));
        }
        return (Map<String, Object>) v;
    }

    static String typeName(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Map) {
            return "an object";
        }
        if (v instanceof List) {
            return "an array";
        }
        if (v instanceof String) {
            return "a string";
        }
        if (v instanceof Boolean) {
            return "a boolean";
        }
        return "a number";
    }

    private Object value(int depth) {
        if (depth > MAX_DEPTH) {
            throw error("nested deeper than " + MAX_DEPTH);
        }
        if (i >= s.length()) {
            throw error("unexpected end of input");
        }
        char c = s.charAt(i);
        switch (c) {
            case '{':
                return object(depth);
            case '[':
                return array(depth);
            case '"':
                return string();
            case 't':
                return literal("true", Boolean.TRUE);
            case 'f':
                return literal("false", Boolean.FALSE);
            case 'n':
                return literal("null", null);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                throw error("unexpected character '" + c + "'");
        }
    }

    private Map<String, Object> object(int depth) {
        i++; // {
        Map<String, Object> m = new LinkedHashMap<>();
        skipWhitespace();
        if (peek() == '}') {
            i++;
            return Collections.unmodifiableMap(m);
        }
        while (true) {
            skipWhitespace();
            if (peek() != '"') {
                throw error("expected a string key");
            }
            int at = i;
            String key = string();
            skipWhitespace();
            expect(':');
            skipWhitespace();
            Object v = value(depth + 1);
            if (m.containsKey(key)) {
                i = at;
                throw error("duplicate key \"" + key + "\"");
            }
            m.put(key, v);
            skipWhitespace();
            char c = next();
            if (c == '}') {
                return Collections.unmodifiableMap(m);
            }
            if (c != ',') {
                i--;
                throw error("expected ',' or '}'");
            }
        }
    }

    private List<Object> array(int depth) {
        i++; // [
        List<Object> l = new ArrayList<>();
        skipWhitespace();
        if (peek() == ']') {
            i++;
            return Collections.unmodifiableList(l);
        }
        while (true) {
            skipWhitespace();
            l.add(value(depth + 1));
            skipWhitespace();
            char c = next();
            if (c == ']') {
                return Collections.unmodifiableList(l);
            }
            if (c != ',') {
                i--;
                throw error("expected ',' or ']'");
            }
        }
    }

    private String string() {
        i++; // opening quote
        StringBuilder b = null;
        int start = i;
        while (true) {
            if (i >= s.length()) {
                throw error("unterminated string");
            }
            char c = s.charAt(i);
            if (c == '"') {
                String out = b == null ? s.substring(start, i) : b.append(s, start, i).toString();
                i++;
                return out;
            }
            if (c < 0x20) {
                throw error("control character in a string");
            }
            if (Character.isSurrogate(c)) {
                if (Character.isHighSurrogate(c) && i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1))) {
                    i += 2;
                    continue;
                }
                throw error("lone surrogate in a string");
            }
            if (c != '\\') {
                i++;
                continue;
            }
            if (b == null) {
                b = new StringBuilder();
            }
            b.append(s, start, i);
            i++;
            char e = next();
            switch (e) {
                case '"':
                case '\\':
                case '/':
                    b.append(e);
                    break;
                case 'b':
                    b.append('\b');
                    break;
                case 'f':
                    b.append('\f');
                    break;
                case 'n':
                    b.append('\n');
                    break;
                case 'r':
                    b.append('\r');
                    break;
                case 't':
                    b.append('\t');
                    break;
                case 'u':
                    char u = hex4();
                    if (Character.isHighSurrogate(u)) {
                        if (!s.startsWith("\\u", i)) {
                            throw error("lone surrogate escape");
                        }
                        i += 2;
                        char low = hex4();
                        if (!Character.isLowSurrogate(low)) {
                            throw error("lone surrogate escape");
                        }
                        b.append(u).append(low);
                    } else if (Character.isLowSurrogate(u)) {
                        throw error("lone surrogate escape");
                    } else {
                        b.append(u);
                    }
                    break;
                default:
                    i--;
                    throw error("bad escape '\\" + e + "'");
            }
            start = i;
        }
    }

    private char hex4() {
        if (i + 4 > s.length()) {
            throw error("short \\u escape");
        }
        int v = 0;
        for (int k = 0; k < 4; k++) {
            int d = Character.digit(s.charAt(i + k), 16);
            if (d < 0) {
                throw error("bad \\u escape");
            }
            v = v * 16 + d;
        }
        i += 4;
        return (char) v;
    }

    private Object number() {
        int start = i;
        if (peek() == '-') {
            i++;
        }
        if (peek() == '0') {
            i++;
        } else if (peek() >= '1' && peek() <= '9') {
            while (isDigit(peek())) {
                i++;
            }
        } else {
            throw error("bad number");
        }
        boolean integral = true;
        if (peek() == '.') {
            integral = false;
            i++;
            if (!isDigit(peek())) {
                throw error("bad number: digits must follow '.'");
            }
            while (isDigit(peek())) {
                i++;
            }
        }
        if (peek() == 'e' || peek() == 'E') {
            integral = false;
            i++;
            if (peek() == '+' || peek() == '-') {
                i++;
            }
            if (!isDigit(peek())) {
                throw error("bad number: digits must follow the exponent");
            }
            while (isDigit(peek())) {
                i++;
            }
        }
        String text = s.substring(start, i);
        if (integral && text.length() <= 18) {
            return Long.parseLong(text);
        }
        if (integral) {
            try {
                return Long.parseLong(text);
            } catch (NumberFormatException ignored) {
                // beyond a long: a double, like Python's json would keep an int but we never need one
            }
        }
        double d = Double.parseDouble(text);
        if (Double.isInfinite(d)) {
            i = start;
            throw error("number out of range");
        }
        return d;
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    private Object literal(String word, Object v) {
        if (!s.startsWith(word, i)) {
            throw error("unexpected token");
        }
        i += word.length();
        return v;
    }

    private void expect(char c) {
        if (next() != c) {
            i--;
            throw error("expected '" + c + "'");
        }
    }

    private char peek() {
        return i < s.length() ? s.charAt(i) : '\0';
    }

    private char next() {
        if (i >= s.length()) {
            throw error("unexpected end of input");
        }
        return s.charAt(i++);
    }

    private void skipWhitespace() {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            i++;
        }
    }

    private IllegalArgumentException error(String what) {
        return new IllegalArgumentException("malformed JSON at offset " + i + ": " + what);
    }

    // ------------------------------------------------------------------ typed access

    /** {@code m.get(key)} as an int, or {@code fallback} when absent or null; fails on another type. */
    static int intField(Map<String, Object> m, String key, Integer fallback, String where) {
        Object v = m.get(key);
        if (v == null) {
            if (fallback == null) {
                throw new IllegalArgumentException(where + ": missing \"" + key + "\"");
            }
            return fallback;
        }
        if (!(v instanceof Long) || (Long) v < Integer.MIN_VALUE || (Long) v > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(where + ": \"" + key + "\" must be an integer, got " + v);
        }
        return (int) (long) (Long) v;
    }

    /** {@code m.get(key)} as a double (an integer allowed), or {@code fallback} when absent or null. */
    static double doubleField(Map<String, Object> m, String key, double fallback, String where) {
        Object v = m.get(key);
        if (v == null) {
            return fallback;
        }
        if (!(v instanceof Number)) {
            throw new IllegalArgumentException(where + ": \"" + key + "\" must be a number, got " + typeName(v));
        }
        return ((Number) v).doubleValue();
    }

    /** {@code m.get(key)} as a boolean, or {@code fallback} when absent or null. */
    static boolean booleanField(Map<String, Object> m, String key, boolean fallback, String where) {
        Object v = m.get(key);
        if (v == null) {
            return fallback;
        }
        if (!(v instanceof Boolean)) {
            throw new IllegalArgumentException(where + ": \"" + key + "\" must be true or false, got " + typeName(v));
        }
        return (Boolean) v;
    }

    /** Escapes {@code s} as a JSON string literal, quotes included. */
    static String quote(String s) {
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format(java.util.Locale.ROOT, "\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
