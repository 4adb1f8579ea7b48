package io.jcomm.spark;

import io.jcomm.api.DistributedConfig;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Function1;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Runs a function on every partition of a Spark barrier stage as a rank of one jcomm job: one call, as
 * pyspark's {@code TorchDistributor.run} does for torch.
 *
 * <pre>{@code
 * List<String> answers = JcommSpark.run(sc, 4, config -> {
 *     try (ParallelState ps = ParallelState.initialize(config, ParallelStateOptions.defaults(), ParallelSizes.of(2, 2))) {
 *         ... // TP all-reduces, PP hand-offs, every value checked
 *         return "rank " + ps.rank() + " ok";
 *     }
 * });
 * }</pre>
 *
 * A barrier stage needs as many free task slots as ranks (Spark refuses it otherwise). Each rank's
 * {@link DistributedConfig} comes from {@link SparkRendezvous#join}: rank = partition id, the store hosted
 * by task 0. The function and its result cross to and from the executors as Spark moves closures and
 * results; jcomm itself never serialises them.
 */
public final class JcommSpark {

    private JcommSpark() {
    }

    /** The work of one rank. Serializable, as every Spark closure. */
    @FunctionalInterface
    public interface RankFunction<R> extends Serializable {
        /** Runs on one rank; {@code config} is its place in the job. */
        R apply(DistributedConfig config) throws Exception;
    }

    /**
     * Runs {@code fn} as ranks {@code 0..ranks-1} of one jcomm job, one barrier task each, and returns their
     * results in rank order. Fails (Spark's exception, naming the task's) when a rank throws.
     */
    public static <R> List<R> run(JavaSparkContext sc, int ranks, RankFunction<R> fn) {
        if (ranks < 1) {
            throw new IllegalArgumentException("ranks must be >= 1, got " + ranks);
        }
        List<Integer> indices = IntStream.range(0, ranks).boxed().collect(Collectors.toList());
        ClassTag<Object> tag = ClassTag$.MODULE$.apply(Object.class);
        Object collected = sc.parallelize(indices, ranks).rdd().barrier().mapPartitions(new Task<>(fn), false, tag)
                .collect();
        List<R> out = new ArrayList<>();
        for (Object o : (Object[]) collected) {
            @SuppressWarnings("unchecked")
            R r = (R) o;
            out.add(r);
        }
        return Collections.unmodifiableList(out);
    }

    /** One barrier task: join the stage's job, run the rank's function, meet the others, return its result. */
    private static final class Task<R> implements Function1<Iterator<Integer>, Iterator<Object>>, Serializable {
        private static final long serialVersionUID = 1L;
        private final RankFunction<R> fn;

        Task(RankFunction<R> fn) {
            this.fn = fn;
        }

        @Override
        public Iterator<Object> apply(Iterator<Integer> partition) {
            Object result;
            try (SparkRendezvous r = SparkRendezvous.join(BarrierTaskContext.get())) {
                result = fn.apply(r.config());
            } catch (RuntimeException e) {
                throw e;
            } catch (Exception e) {
                throw new IllegalStateException("rank function failed: " + e, e);
            }
            return CollectionConverters.asScala(List.of(result).iterator());
        }
    }
}
