// Baseline for docs/notes/gloo.md: libgloo alone, 2 processes on loopback, rendezvous over a FileStore.
// g++ -std=c++17 -O2 gloo_bench.cpp -o gloo_bench -lgloo && mkdir fs && (./gloo_bench 1 fs & ./gloo_bench 0 fs; wait)
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>
using clk = std::chrono::steady_clock;
static void rep(const char* what, std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  printf("%-18s p50 %10.1f us  p99 %10.1f us  (n=%zu)\n", what, v[v.size()/2], v[(size_t)(v.size()*0.99)], v.size());
}
int main(int argc, char** argv) {
  int rank = atoi(argv[1]); int size = 2;
  gloo::rendezvous::FileStore store(argv[2]);
  gloo::transport::tcp::attr a; a.hostname = "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(a);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  ctx->setTimeout(std::chrono::seconds(60));
  ctx->connectFullMesh(store, dev);
  uint32_t tag = 0;
  auto fn = static_cast<void(*)(void*,const void*,const void*,size_t)>(&gloo::sum<float>);
  std::vector<double> t;
  for (int i = 0; i < 3000; i++) { auto s = clk::now(); gloo::BarrierOptions o(ctx); o.setTag(tag++); gloo::barrier(o);
    if (i >= 500) t.push_back(std::chrono::duration<double, std::micro>(clk::now() - s).count()); }
  if (rank == 0) rep("barrier", t);
  for (size_t n : {size_t(1), size_t(4 << 20)}) {
    std::vector<float> v(n, 1.0f); t.clear(); int iters = n == 1 ? 3000 : 60, warm = n == 1 ? 500 : 10;
    for (int i = 0; i < iters; i++) { auto s = clk::now(); gloo::AllreduceOptions o(ctx); o.setOutput(v.data(), n); o.setReduceFunction(fn); o.setTag(tag++); gloo::allreduce(o);
      if (i >= warm) t.push_back(std::chrono::duration<double, std::micro>(clk::now() - s).count()); }
    if (rank == 0) rep(n == 1 ? "allreduce 4 B" : "allreduce 16 MiB", t);
  }
}
