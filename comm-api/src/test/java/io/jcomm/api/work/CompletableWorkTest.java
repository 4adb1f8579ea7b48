package io.jcomm.api.work;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.BackendException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class CompletableWorkTest {

    private static final OpContext CTX = OpContext.of("g", 0, "send");

    @Test
    void awaitIsIdempotentAndReleasesBuffers() {
        CompletableWork<String> w = new CompletableWork<>(CTX, Deadline.after(Duration.ofSeconds(5)), new byte[16]);
        assertTrue(w.pinsBuffers());
        assertFalse(w.isDone());
        w.complete("ok");
        assertFalse(w.pinsBuffers());
        assertEquals("ok", w.await());
        assertEquals("ok", w.await());
        assertEquals("ok", w.await(Duration.ofMillis(1)));
        assertTrue(w.isSuccess());
        assertTrue(w.failure().isEmpty());
    }

    @Test
    void failureRethrowsTheSameTypedExceptionEveryTime() {
        CompletableWork<Void> w = new CompletableWork<>(CTX, Deadline.after(Duration.ofSeconds(5)), null);
        PeerFailureException cause = new PeerFailureException(CTX, 1, "reset");
        w.fail(cause);
        assertSame(cause, assertThrows(PeerFailureException.class, w::await));
        assertSame(cause, assertThrows(PeerFailureException.class, w::await));
        assertSame(cause, w.failure().orElseThrow());
        assertFalse(w.isSuccess());
        CompletableWork<Void> other = CompletableWork.failed(CTX, new IllegalStateException("native"));
        BackendException be = assertThrows(BackendException.class, other::await);
        assertTrue(be.getMessage().contains("native"));
    }

    @Test
    void waitTimeoutLeavesTheWorkAwaitableButOwnDeadlineIsFinal() {
        // the work's own deadline is far enough that a stalled await(10 ms) cannot reach it
        CompletableWork<Void> w = new CompletableWork<>(CTX, Deadline.after(Duration.ofMillis(1500)), null);
        CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> w.await(Duration.ofMillis(10)));
        assertTrue(e.getMessage().contains("can be awaited again"), e.getMessage());
        e = assertThrows(CommTimeoutException.class, w::await);
        assertTrue(e.getMessage().contains("before its deadline"), e.getMessage());
        w.complete(null);
        w.await();
    }
}
