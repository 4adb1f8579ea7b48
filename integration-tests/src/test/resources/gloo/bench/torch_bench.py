"""Baseline for docs/notes/gloo.md: torch 1.13 gloo, 2 ranks.

RANK=r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=p GLOO_SOCKET_IFNAME=lo /usr/bin/python3 torch_bench.py
"""
import os, time, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="env://")
r = dist.get_rank()
def bench(name, fn, iters, warm):
    ts = []
    for i in range(iters):
        s = time.perf_counter(); fn(); e = time.perf_counter()
        if i >= warm: ts.append((e - s) * 1e6)
    ts.sort()
    if r == 0: print(f"{name:18s} p50 {ts[len(ts)//2]:10.1f} us  p99 {ts[int(len(ts)*0.99)]:10.1f} us  (n={len(ts)})", flush=True)
bench("barrier", dist.barrier, 3000, 500)
t = torch.ones(1); bench("allreduce 4 B", lambda: dist.all_reduce(t), 3000, 500)
t = torch.ones(4 << 20); bench("allreduce 16 MiB", lambda: dist.all_reduce(t), 60, 10)
