package io.jcomm.runtime;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/** Strict UTF-8 for bytes that crossed a process boundary: malformed input is refused, never replaced. */
public final class Utf8 {

    private Utf8() {
    }

    /**
     * The string {@code bytes} (from its position to its limit) hold, or null when they are not
     * well-formed UTF-8. The buffer's position is consumed.
     */
    public static String decodeStrict(ByteBuffer bytes) {
        try {
            return StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(bytes).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }
}
