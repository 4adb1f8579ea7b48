/*
 * Per-call cost of ncclAllReduce on 4 bytes (1 float), world size 1, called from C: the baseline
 * for jcomm's Java path in scripts/gpu-check.sh. Same measurement as GpuCheck.java: enqueue-only
 * time per call over N calls, then call+synchronize per call over N/10 calls.
 *
 * build: gcc -O2 -o nccl_overhead nccl_overhead.c -I<nccl include> -I<cuda include> \
 *            -L<nccl lib> -L<cudart lib> -lnccl -lcudart
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CUDA(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
  fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)
#define NCCL(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { \
  fprintf(stderr, "%s failed: %s\n", #call, ncclGetErrorString(r_)); return 1; } } while (0)

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  int version = 0;
  NCCL(ncclGetVersion(&version));
  CUDA(cudaSetDevice(0));
  ncclUniqueId id;
  ncclComm_t comm;
  NCCL(ncclGetUniqueId(&id));
  NCCL(ncclCommInitRank(&comm, 1, id, 0));
  cudaStream_t s;
  CUDA(cudaStreamCreate(&s));
  float *buf;
  CUDA(cudaMalloc((void **)&buf, sizeof(float)));
  int warm = n < 5000 ? n : 5000;
  for (int i = 0; i < warm; i++) NCCL(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, s));
  CUDA(cudaStreamSynchronize(s));
  double t0 = now_us();
  for (int i = 0; i < n; i++) NCCL(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, s));
  double t1 = now_us();
  CUDA(cudaStreamSynchronize(s));
  int m = n / 10 > 0 ? n / 10 : 1;
  double t2 = now_us();
  for (int i = 0; i < m; i++) {
    NCCL(ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, s));
    CUDA(cudaStreamSynchronize(s));
  }
  double t3 = now_us();
  printf("%-44s %16.2f %18.2f\n", "C ncclAllReduce (nccl.h, libnccl)", (t1 - t0) / n, (t3 - t2) / m);
  printf("(NCCL version code %d)\n", version);
  CUDA(cudaFree(buf));
  NCCL(ncclCommDestroy(comm));
  return 0;
}
