#!/usr/bin/python3
"""torch.distributed (gloo) counterpart of bin/commbench: same operations, sizes and table format.

usage: /usr/bin/python3 scripts/torch_gloo_bench.py <op> --nproc N -b MIN -e MAX -f FACTOR
                                                    [-w WARMUP] [-n ITERS] [--dtype f32] [--json FILE]
ops: barrier broadcast allreduce allgather reducescatter gather scatter sendrecv alltoall alltoallv
     broadcast-object allgather-object
Time per size is the median over iterations of the slowest rank's time (as in commbench); cpu(us) is the
busiest rank's process CPU time (all threads) per iteration;
latency ops report p50/p99/p99.9. busbw uses nccl-tests' factors.
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from _ranks import die_with_parent

DTYPES = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32, "i64": torch.int64, "i8": torch.int8, "u8": torch.uint8}
LATENCY = {"barrier", "broadcast-object", "allgather-object"}
SPLIT = {"allgather", "reducescatter", "gather", "scatter", "alltoall", "alltoallv"}


def parse_size(s):
    s = s.strip().upper().rstrip("B")
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:], 1)
    if mul > 1:
        s = s[:-1]
    return int(s) * mul


def bus_factor(op, n):
    if op == "allreduce":
        return 2.0 * (n - 1) / n
    if op in SPLIT:
        return (n - 1) / n
    return 1.0


def percentile(sorted_vals, p):
    if not sorted_vals:
        return 0.0
    k = max(0, min(len(sorted_vals) - 1, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


def alltoallv_splits(src, n, chunk):
    """What rank src sends each rank in the alltoallv benchmark (the same rule as commbench's)."""
    delta = chunk // 4
    return [chunk + (delta if (src + d) % 2 == 0 else -delta) for d in range(n)]


def make_body(op, rank, n, dtype, size):
    es = torch.tensor([], dtype=dtype).element_size()
    count = size // es
    if op in SPLIT:
        count = count // n * n
    if op == "barrier":
        return (lambda: dist.barrier()), 0
    if op in ("broadcast-object", "allgather-object"):
        payload = bytes([7]) * max(1, size - 8)
        if op == "broadcast-object":
            def bo():
                lst = [payload if rank == 0 else None]
                dist.broadcast_object_list(lst, src=0)
            return bo, size

        def ago():
            out = [None] * n
            dist.all_gather_object(out, payload)
        return ago, size
    if count == 0:
        return None, 0
    if op == "broadcast":
        x = torch.zeros(count, dtype=dtype)
        return (lambda: dist.broadcast(x, src=0)), count
    if op == "allreduce":
        x = torch.ones(count, dtype=dtype)
        return (lambda: dist.all_reduce(x)), count
    if op == "allgather":
        inp = torch.zeros(count // n, dtype=dtype)
        outs = [torch.zeros(count // n, dtype=dtype) for _ in range(n)]
        return (lambda: dist.all_gather(outs, inp)), count
    if op == "reducescatter":
        raise SystemExit("torch 1.13's gloo backend has no reduce_scatter")
    if op == "gather":
        inp = torch.zeros(count // n, dtype=dtype)
        outs = [torch.zeros(count // n, dtype=dtype) for _ in range(n)] if rank == 0 else None
        return (lambda: dist.gather(inp, outs, dst=0)), count
    if op == "scatter":
        out = torch.zeros(count // n, dtype=dtype)
        ins = [torch.zeros(count // n, dtype=dtype) for _ in range(n)] if rank == 0 else None
        return (lambda: dist.scatter(out, ins, src=0)), count
    if op == "alltoall":
        inp = torch.zeros(count, dtype=dtype)
        out = torch.zeros(count, dtype=dtype)
        return (lambda: dist.all_to_all_single(out, inp)), count
    if op == "alltoallv":
        ins = alltoallv_splits(rank, n, count // n)
        outs = [alltoallv_splits(s, n, count // n)[rank] for s in range(n)]
        inp = torch.zeros(sum(ins), dtype=dtype)
        out = torch.zeros(sum(outs), dtype=dtype)
        return (lambda: dist.all_to_all_single(out, inp, outs, ins)), count
    if op == "sendrecv":
        out = torch.zeros(count, dtype=dtype)
        inp = torch.zeros(count, dtype=dtype)
        nxt, prv = (rank + 1) % n, (rank + n - 1) % n
        if rank % 2 == 0:
            def even():
                dist.send(out, nxt)
                dist.recv(inp, prv)
            return even, count

        def odd():
            dist.recv(inp, prv)
            dist.send(out, nxt)
        return odd, count
    raise SystemExit("unknown op " + op)


def worker(rank, args, port, sizes, queue):
    die_with_parent()
    if args.pin:
        os.sched_setaffinity(0, {rank % os.cpu_count()})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=args.nproc)
    n = args.nproc
    dtype = DTYPES[args.dtype]
    x = torch.ones(256)
    t_end = time.time() + 0.3
    for i in range(2000):  # warm-up, like commbench
        dist.barrier()
        dist.all_reduce(x)
        flag = torch.tensor([1 if (rank != 0 or time.time() < t_end) else 0])
        dist.broadcast(flag, 0)
        if flag.item() == 0:
            break
    for size in sizes:
        body, count = make_body(args.op, rank, n, dtype, size)
        if body is None:
            continue
        for _ in range(args.warmup):
            body()
        dist.barrier()
        times = []
        cpu0 = time.process_time_ns()
        for _ in range(args.iters):
            t0 = time.perf_counter_ns()
            body()
            times.append(time.perf_counter_ns() - t0)
        times.append(time.process_time_ns() - cpu0)  # last element: CPU time of the loop (all threads)
        t = torch.tensor(times, dtype=torch.int64)
        allt = [torch.zeros_like(t) for _ in range(n)]
        dist.all_gather(allt, t)
        if rank == 0:
            worst = torch.stack(allt).max(dim=0).values.tolist()
            cpu_us = worst[-1] / 1000.0 / args.iters
            worst = worst[:-1]
            s = sorted(worst)
            med = (s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2.0)
            if args.op == "barrier":
                nbytes = 0
            elif args.op in ("broadcast-object", "allgather-object"):
                nbytes = size
                count = size
            else:
                nbytes = count * torch.tensor([], dtype=dtype).element_size()
            algbw = nbytes / med if nbytes else 0.0
            queue.put(dict(size=nbytes, count=count,
                           dtype="obj" if args.op.endswith("object") else args.dtype,
                           time_us=med / 1000.0, algbw_gbps=algbw, busbw_gbps=algbw * bus_factor(args.op, n),
                           p50_us=percentile(s, 50) / 1000.0, p99_us=percentile(s, 99) / 1000.0,
                           p999_us=percentile(s, 99.9) / 1000.0, iters=args.iters, cpu_us=cpu_us))
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("op")
    p.add_argument("--nproc", "-N", type=int, default=2)
    p.add_argument("-b", "--minbytes")
    p.add_argument("-e", "--maxbytes")
    p.add_argument("-f", "--stepfactor", type=int, default=4)
    p.add_argument("-w", "--warmup_iters", dest="warmup", type=int)
    p.add_argument("-n", "--iters", type=int)
    p.add_argument("-d", "--dtype", default="f32")
    p.add_argument("--json")
    p.add_argument("--pin", action="store_true", help="run rank r on CPU r mod CPUs (as commbench --pin)")
    args = p.parse_args()
    lat = args.op in LATENCY
    obj = args.op.endswith("object")
    mn = parse_size(args.minbytes or ("0" if args.op == "barrier" else "100" if obj else "1K"))
    mx = parse_size(args.maxbytes or ("0" if args.op == "barrier" else "100" if obj else "64M"))
    args.warmup = args.warmup if args.warmup is not None else (2000 if lat else 5)
    args.iters = args.iters if args.iters is not None else (10000 if lat else 20)
    sizes = [0] if args.op == "barrier" else ([mn] if mn == mx else [])
    if not sizes:
        s = mn
        while s <= mx:
            sizes.append(s)
            s = s * args.stepfactor if s else 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print("# torch_gloo_bench %s  backend=gloo(torch %s)  nproc=%d  dtype=%s  warmup=%d  iters=%d"
          % (args.op, torch.__version__, args.nproc, args.dtype, args.warmup, args.iters))
    if lat:
        print("#%13s %12s %6s %11s %11s %11s %8s %9s" % ("size(B)", "count", "dtype", "p50(us)", "p99(us)", "p99.9(us)",
                                                        "iters", "cpu(us)"))
    else:
        print("#%13s %12s %6s %11s %12s %12s %9s" % ("size(B)", "count", "dtype", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
                                                    "cpu(us)"))
    sys.stdout.flush()
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    procs = [ctx.Process(target=worker, args=(r, args, port, sizes, queue)) for r in range(args.nproc)]
    for pr in procs:
        pr.start()
    rows = []
    expected = len([s for s in sizes])
    while len(rows) < expected and any(pr.is_alive() for pr in procs):
        if queue.empty():
            time.sleep(0.01)
            continue
        r = queue.get()
        rows.append(r)
        if lat:
            print(" %13d %12d %6s %11.1f %11.1f %11.1f %8d %9.1f"
                  % (r["size"], r["count"], r["dtype"], r["p50_us"], r["p99_us"], r["p999_us"], r["iters"], r["cpu_us"]))
        else:
            print(" %13d %12d %6s %11.1f %12.3f %12.3f %9.1f"
                  % (r["size"], r["count"], r["dtype"], r["time_us"], r["algbw_gbps"], r["busbw_gbps"], r["cpu_us"]))
        sys.stdout.flush()
    for pr in procs:
        pr.join()
    while not queue.empty():
        rows.append(queue.get())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(tool="torch_gloo_bench", op=args.op, backend="gloo", torch=torch.__version__,
                           nproc=args.nproc, results=rows), f, indent=2)
    return 0 if all(pr.exitcode == 0 for pr in procs) else 1


if __name__ == "__main__":
    sys.exit(main())
