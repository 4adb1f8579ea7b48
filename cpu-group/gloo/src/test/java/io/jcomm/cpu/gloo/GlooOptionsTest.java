package io.jcomm.cpu.gloo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** Typed gloo options (no native library needed). */
class GlooOptionsTest {

    @Test
    void defaultsRoundTripAndText() {
        GlooOptions d = GlooOptions.builder().build();
        assertEquals(Map.of(), d.asMap());
        assertEquals("gloo", d.backend());
        assertEquals(GlooBackend.DEVICES_DEFAULT, d.devices());
        assertEquals(Optional.empty(), d.ifname());
        assertEquals(Optional.empty(), d.hostname());
        assertEquals(GlooBackend.GOODBYE_DEFAULT, d.goodbye());
        assertFalse(d.torchHalf());
        assertEquals(GlooBackend.CHECK_ARGS_DEFAULT, d.checkArgs());
        assertEquals(GlooBackend.LOOP_NICE_DEFAULT, d.loopNice());

        GlooOptions o = GlooOptions.builder().devices(2).ifname(" lo ").hostname("127.0.0.1").goodbye(false)
                .torchHalf(true).checkArgs(false).loopNice(0).build();
        assertEquals(GlooOptions.KEYS, o.asMap().keySet());
        assertEquals(Optional.of("lo"), o.ifname());
        assertEquals(o, GlooOptions.fromMap(o.asMap()));
        assertEquals(o, GlooOptions.fromMap(Map.of(GlooBackend.DEVICES_OPTION, " 2", GlooBackend.IFNAME_OPTION, "lo",
                GlooBackend.HOSTNAME_OPTION, "127.0.0.1", GlooBackend.GOODBYE_OPTION, "FALSE",
                GlooBackend.TORCH_HALF_OPTION, "true", GlooBackend.CHECK_ARGS_OPTION, "false",
                GlooBackend.LOOP_NICE_OPTION, "0", "tcp.shm", "whatever")));
        assertEquals(d, GlooOptions.fromMap(Map.of(GlooBackend.DEVICES_OPTION, " ", GlooBackend.IFNAME_OPTION, "")),
                "blank is unset");
        assertEquals(GlooOptions.KEYS, new GlooBackendProvider().optionKeys().orElseThrow());
    }

    @Test
    void badValuesAndUnknownKeysAreRejectedNamingTheKey() {
        String[][] bad = {
                {GlooBackend.DEVICES_OPTION, "0", "is not in [1, 16]"},
                {GlooBackend.DEVICES_OPTION, "17", "is not in [1, 16]"},
                {GlooBackend.DEVICES_OPTION, "x", "is not an integer"},
                {GlooBackend.LOOP_NICE_OPTION, "20", "is not in [0, 19]"},
                {GlooBackend.CHECK_ARGS_OPTION, "maybe", "is not true or false"},
                {GlooBackend.GOODBYE_OPTION, "1", "is not true or false"},
        };
        for (String[] c : bad) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> GlooOptions.fromMap(Map.of(c[0], c[1])));
            assertTrue(e.getMessage().startsWith(c[0] + "=" + c[1]) && e.getMessage().contains(c[2]), e.getMessage());
        }
        IllegalArgumentException typed = assertThrows(IllegalArgumentException.class,
                () -> GlooOptions.builder().devices(0).build());
        assertEquals(GlooBackend.DEVICES_OPTION + "=0 is not in [1, 16]", typed.getMessage());
        IllegalArgumentException unknown = assertThrows(IllegalArgumentException.class,
                () -> GlooOptions.fromMap(Map.of("gloo.device", "2")));
        assertTrue(unknown.getMessage().startsWith("unknown option 'gloo.device' of CPU backend gloo; known: [")
                && unknown.getMessage().contains(GlooBackend.DEVICES_OPTION), unknown.getMessage());
    }
}
