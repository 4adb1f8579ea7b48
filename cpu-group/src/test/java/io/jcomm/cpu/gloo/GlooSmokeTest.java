package io.jcomm.cpu.gloo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.jcomm.api.Deadline;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class GlooSmokeTest {

    @Test
    void allReduceSumOnThreeThreadRanks() {
        ThreadRanks.run(3, (b, rank) -> {
            Tensor t = Tensor.ofFloats(rank, 10 + rank, -rank);
            b.allReduce(t, ReduceOp.SUM, Deadline.after(Duration.ofSeconds(10)));
            assertArrayEquals(new double[] {3, 33, -3}, t.toDoubleArray());
        });
    }
}
