package io.jcomm.device;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.jcomm.api.Tensor;
import io.jcomm.api.device.P2POp;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

class P2PScheduleTest {

    private static String show(List<P2POp> ops) {
        return ops.stream().map(o -> (o.kind() == P2POp.Kind.SEND ? "s" : "r") + o.peer()).collect(Collectors.joining(" "));
    }

    @Test
    void ringOfThreeRunsInPairOrderLowerRankSendingFirst() {
        Tensor t = Tensor.ofFloats(1);
        // rank r: send to r+1, recv from r-1 (listed recv first to show the order is not the caller's)
        assertEquals("s1 r2", show(P2PSchedule.order(List.of(P2POp.recv(t, 2), P2POp.send(t, 1)), 0)));
        assertEquals("r0 s2", show(P2PSchedule.order(List.of(P2POp.recv(t, 0), P2POp.send(t, 2)), 1)));
        assertEquals("s0 r1", show(P2PSchedule.order(List.of(P2POp.recv(t, 1), P2POp.send(t, 0)), 2)));
    }

    @Test
    void selfIsLeftOutAndOrderWithinADirectionIsKept() {
        Tensor a = Tensor.ofFloats(1);
        Tensor b = Tensor.ofFloats(2);
        List<P2POp> ops = List.of(P2POp.send(a, 3), P2POp.recv(a, 3), P2POp.send(b, 3), P2POp.send(a, 1), P2POp.recv(b, 1));
        List<P2POp> order = P2PSchedule.order(ops, 2);
        assertEquals("r1 s1 s3 s3 r3", show(order));
        assertEquals(a, order.get(2).tensor());
        assertEquals(b, order.get(3).tensor());
        assertEquals("", show(P2PSchedule.order(List.of(P2POp.send(a, 0), P2POp.recv(b, 0)), 0)));
    }
}
