package io.jcomm.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.jcomm.api.store.InMemoryStore;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The store list's readers never wait on an entry that was counted and not written: one whose appender was
 * killed between its two steps hides nothing after it, one written late still comes, and a counter beyond the
 * bound is not followed.
 */
@Timeout(30)
class StoreListTest {

    private static final Duration T = Duration.ofSeconds(5);
    private final InMemoryStore store = new InMemoryStore(T);
    private final StoreList list = new StoreList(store, "l/n", "l/", 1000);

    @AfterEach
    void close() {
        store.close();
    }

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    private List<String> drain(StoreList.Reader r) {
        List<String> out = new ArrayList<>();
        for (long i; (i = r.next()) >= 0; ) {
            out.add(i + "=" + new String(list.get(i, T), StandardCharsets.UTF_8));
        }
        return out;
    }

    @Test
    void entriesComeOnceInOrder() {
        StoreList.Reader r = list.reader();
        assertEquals(List.of(), drain(r));
        assertEquals(1, list.append(b("a")));
        assertEquals(2, list.append(b("b")));
        assertEquals(List.of("1=a", "2=b"), drain(r));
        assertEquals(List.of(), drain(r));
        assertEquals(3, list.append(b("c")));
        assertEquals(List.of("3=c"), drain(r));
        assertEquals(3, list.count());
    }

    @Test
    void anEntryCountedButNeverWrittenHidesNothingAfterIt() {
        list.append(b("a"));
        store.add("l/n", 1); // an appender killed between counting entry 2 and writing it
        StoreList.Reader r = list.reader();
        assertEquals(List.of("1=a"), drain(r), "entry 2 may still be being written: nothing after it is counted");
        list.append(b("c"));
        list.append(b("d"));
        assertEquals(List.of("3=c", "4=d"), drain(r));
        assertEquals(1, r.setAside());
        assertEquals(List.of("a", "c", "d"), list.written(T).stream().map(v -> new String(v, StandardCharsets.UTF_8)).toList());
    }

    @Test
    void anEntryWrittenLateStillComes() {
        store.add("l/n", 1); // an appender stopped between its two steps
        list.append(b("b"));
        StoreList.Reader r = list.reader();
        assertEquals(List.of("2=b"), drain(r));
        list.overwrite(1, b("a")); // it resumes
        assertEquals(List.of("1=a"), drain(r));
        assertEquals(0, r.setAside());
    }

    @Test
    void setAsideEntriesAndTheCounterAreBounded() {
        StoreList small = new StoreList(store, "s/n", "s/", 200);
        store.add("s/n", 150); // 150 entries counted, none written
        small.append(b("x")); // entry 151
        StoreList.Reader r = small.reader();
        assertEquals(151, r.next());
        assertEquals(-1, r.next());
        assertEquals(StoreList.MAX_SET_ASIDE, r.setAside());
        store.add("s/n", 1_000_000_000L); // a counter far beyond the bound is not followed
        assertEquals(-1, r.next());
        assertEquals(StoreList.MAX_SET_ASIDE, r.setAside());
        assertThrows(IllegalArgumentException.class, () -> new StoreList(store, "z/n", "z/", 0));
    }
}
