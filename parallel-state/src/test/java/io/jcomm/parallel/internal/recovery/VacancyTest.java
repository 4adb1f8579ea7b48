package io.jcomm.parallel.internal.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class VacancyTest {

    private static final OpContext CTX = OpContext.of("recovery", -1, "join");

    private static Vacancy sample() {
        return new Vacancy(3, 7, 0xfeedfacecafebeefL, 2, 1, List.of(0, 1, 4, 5), List.of(1, 4),
                List.of("h0", "h0", "h0", "h0", "h1", "h1"));
    }

    @Test
    void roundTripsEveryField() {
        Vacancy v = sample();
        Vacancy back = Vacancy.decode(v.encode(), 6, CTX);
        assertEquals(v, back);
        assertEquals(List.of(List.of(0, 1), List.of(4, 5)), back.layout().tpGroups());
    }

    @Test
    void refusesMalformedOrOversizedRecordsWithATypedError() {
        String good = new String(sample().encode(), StandardCharsets.UTF_8);
        List<String> bad = List.of(
                "",                                                   // nothing
                good.replace("jcomm-vacancy 1", "jcomm-vacancy 2"),   // another version
                good.replace("0,1,4,5", "0,4,1,5"),                   // not ascending
                good.replace("0,1,4,5", "0,1,4,9"),                   // beyond the world
                good.replace("\n1,4\n", "\n1,3\n"),                   // a lost rank outside the layout
                good.replace("3 7 ", "0 7 "),                         // round 0
                good.replace(" 2 1\n", " 3 1\n"),                     // tp does not divide the ranks
                good.replace("feedfacecafebeef", "xyz"),              // not hex
                good.replace("h1\nh1\n", "h1\n\n"),                   // an empty host id
                good + "extra\n");                                    // a line too many
        for (String b : bad) {
            ProtocolException e = assertThrows(ProtocolException.class,
                    () -> Vacancy.decode(b.getBytes(StandardCharsets.UTF_8), 6, CTX), b);
            assertTrue(e.getMessage().contains("vacanc"), e.getMessage());
        }
        assertThrows(ProtocolException.class, () -> Vacancy.decode(null, 6, CTX));
        assertThrows(ProtocolException.class, () -> Vacancy.decode(new byte[Vacancy.MAX_BYTES + 1], 6, CTX));
        assertThrows(ProtocolException.class, () -> Vacancy.decode(sample().encode(), 5, CTX), "another world size");
    }
}
