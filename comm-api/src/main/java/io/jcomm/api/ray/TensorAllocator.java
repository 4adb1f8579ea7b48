package io.jcomm.api.ray;

import io.jcomm.api.DType;
import io.jcomm.api.Tensor;

/** Allocates the buffer a {@link Communicator#recv} writes into (Ray's {@code allocator}). */
@FunctionalInterface
public interface TensorAllocator {

    Tensor allocate(long[] shape, DType dtype);
}
