#!/usr/bin/python3
"""torch.distributed (gloo) counterpart of `bin/commbench pipeline`: the same streaming pipeline step.

usage: /usr/bin/python3 scripts/torch_pipeline_bench.py --tp T --pp P --hidden 1K,256K [--steps N]
                                                         [--warmup W] [--pin] [--recv alloc|prealloc]

Spawns T x P ranks (vLLM's layout: TP varies fastest) with a gloo world group, TP groups and PP groups.
Each step is what vLLM's GroupCoordinator does between pipeline stages, on the CPU:
  1. stage 0: TP rank 0 broadcasts a small metadata dict to its TP group (broadcast_tensor_dict:
     broadcast_object_list of the metadata, then broadcast of its tensor);
  2. every stage: all_reduce of its activation (HIDDEN f32) over TP;
  3. stage k sends {step, activation} to stage k+1 (send_tensor_dict: the metadata as an object -
     size, then pickled bytes - then each TP rank's 1/TP slice of the activation); stage k+1 receives
     it (recv_tensor_dict: torch.empty, recv) and all-gathers the slices in its TP group.
Two values of every received activation are checked. The activation tensor is allocated once per
size and reused; received tensors are allocated per step, as vLLM does (--recv alloc, the default), or
once per size and received into each step (--recv prealloc: the fastest torch loop).

Prints per size: "ROW hidden=H bytes=B steps=N seconds=S steps_per_s=R" and per-operation
"OP hidden=H name=NAME p50_us=X p99_us=Y p999_us=Z mean_us=M" lines (over all ranks), after "# ..." header lines.
"""
import argparse
import os
import pickle
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from _ranks import die_with_parent


def parse_count(s):
    s = s.strip().upper()
    mul = {"K": 1 << 10, "M": 1 << 20}.get(s[-1:], 1)
    if mul > 1:
        s = s[:-1]
    return int(s) * mul


def percentile(sorted_vals, p):
    if not sorted_vals:
        return 0.0
    k = max(0, min(len(sorted_vals) - 1, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


def auto_steps(hidden):
    return max(1000, min(30000, (2 << 30) // (4 * hidden)))


def send_object(obj, dst, group):
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    size = torch.tensor([data.numel()], dtype=torch.long)
    dist.send(size, dst=dst, group=group)
    dist.send(data, dst=dst, group=group)


def recv_object(src, group):
    size = torch.empty(1, dtype=torch.long)
    dist.recv(size, src=src, group=group)
    data = torch.empty(int(size.item()), dtype=torch.uint8)
    dist.recv(data, src=src, group=group)
    return pickle.loads(data.numpy().tobytes())


def worker(rank, args, port, sizes, queue):
    die_with_parent()
    if args.pin:
        os.sched_setaffinity(0, {rank % os.cpu_count()})
    torch.set_num_threads(1)
    tp, pp = args.tp, args.pp
    world = tp * pp
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=world)
    tp_groups = [dist.new_group(list(range(s * tp, (s + 1) * tp))) for s in range(pp)]
    pp_groups = [dist.new_group([s * tp + t for s in range(pp)]) for t in range(tp)]
    stage, tp_rank = rank // tp, rank % tp
    tp_group, pp_group = tp_groups[stage], pp_groups[tp_rank]
    prev = (stage - 1) * tp + tp_rank
    nxt = (stage + 1) * tp + tp_rank
    for hidden in sizes:
        act = torch.zeros(hidden, dtype=torch.float32)
        positions = torch.zeros(4, dtype=torch.int32)
        steps = args.steps or auto_steps(hidden)
        times = {"tp broadcast metadata": [], "tp all-reduce": [], "pp send tensor dict": [],
                 "pp recv tensor dict": [], "whole step": []}
        prealloc = args.recv == "prealloc"
        recv_fixed = torch.empty(hidden // tp, dtype=torch.float32)
        full_fixed = torch.empty(hidden, dtype=torch.float32)
        dist.barrier()
        start = 0.0
        for s in range(args.warmup + steps):
            if s == args.warmup:
                dist.barrier()
                start = time.perf_counter()
            measure = s >= args.warmup
            t_step = time.perf_counter()
            if stage == 0:
                t = time.perf_counter()
                if tp > 1:
                    if tp_rank == 0:
                        positions[0] = s
                        meta = [{"step": s, "positions": ("cpu", torch.int32, (4,))}]
                    else:
                        meta = [None]
                    dist.broadcast_object_list(meta, src=stage * tp, group=tp_group)
                    if tp_rank != 0:
                        positions = torch.empty(4, dtype=torch.int32)
                    dist.broadcast(positions, src=stage * tp, group=tp_group)
                    if meta[0]["step"] != s or int(positions[0]) != s:
                        raise SystemExit("rank %d: bad metadata at step %d" % (rank, s))
                if measure:
                    times["tp broadcast metadata"].append(time.perf_counter() - t)
            else:
                t = time.perf_counter()
                meta = recv_object(prev, pp_group)
                part = hidden // tp
                recv_buf = recv_fixed if prealloc else torch.empty(part, dtype=torch.float32)
                dist.recv(recv_buf, src=prev, group=pp_group)
                if tp > 1:
                    full = full_fixed if prealloc else torch.empty(hidden, dtype=torch.float32)
                    dist.all_gather(list(full.chunk(tp)), recv_buf, group=tp_group)
                else:
                    full = recv_buf
                if measure:
                    times["pp recv tensor dict"].append(time.perf_counter() - t)
                if meta["step"] != s or full[0].item() != tp * (s % 1000) or full[-1].item() != tp * stage:
                    raise SystemExit("rank %d: bad activation at step %d: %r %r" % (rank, s, full[0].item(),
                                                                                     full[-1].item()))
            act[0] = s % 1000
            act[-1] = stage + 1
            t = time.perf_counter()
            if tp > 1:
                dist.all_reduce(act, group=tp_group)
            else:
                act[0] = act[0] * tp
                act[-1] = act[-1] * tp
            if measure:
                times["tp all-reduce"].append(time.perf_counter() - t)
            if stage < pp - 1:
                t = time.perf_counter()
                send_object({"step": s, "hidden": ("cpu", torch.float32, (hidden,))}, nxt, pp_group)
                part = hidden // tp
                dist.send(act[tp_rank * part:(tp_rank + 1) * part].contiguous(), dst=nxt, group=pp_group)
                if measure:
                    times["pp send tensor dict"].append(time.perf_counter() - t)
            if measure:
                times["whole step"].append(time.perf_counter() - t_step)
        elapsed = time.perf_counter() - start
        dist.barrier()
        queue.put((rank, hidden, steps, elapsed, times))
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--hidden", default="1K,4K,16K,64K,256K,1M")
    ap.add_argument("--steps", type=int, default=0, help="timed steps per size (default: by size, 1000-30000)")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--pin", action="store_true")
    ap.add_argument("--recv", choices=["alloc", "prealloc"], default="alloc")
    args = ap.parse_args()
    sizes = [parse_count(x) for x in args.hidden.split(",")]
    world = args.tp * args.pp
    for h in sizes:
        if h % args.tp:
            raise SystemExit("--hidden must be a multiple of --tp")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print("# torch %s gloo pipeline: TP=%d x PP=%d, %d processes, warm-up %d steps, recv %s" % (
        torch.__version__, args.tp, args.pp, world, args.warmup, args.recv), flush=True)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args, port, sizes, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    for _ in range(world * len(sizes)):
        rank, hidden, steps, elapsed, times = queue.get(timeout=1800)
        results.setdefault(hidden, []).append((steps, elapsed, times))
    for p in procs:
        p.join(60)
    ok = all(p.exitcode == 0 for p in procs)
    for hidden in sizes:
        rows = results.get(hidden, [])
        steps = rows[0][0]
        elapsed = max(r[1] for r in rows)
        print("ROW hidden=%d bytes=%d steps=%d seconds=%.4f steps_per_s=%.1f" % (
            hidden, 4 * hidden, steps, elapsed, steps / elapsed), flush=True)
        for name in rows[0][2]:
            vals = sorted(v for r in rows for v in r[2][name])
            if vals:
                print("OP hidden=%d name=%s p50_us=%.1f p99_us=%.1f p999_us=%.1f mean_us=%.1f" % (
                    hidden, name.replace(" ", "_"), percentile(vals, 50) * 1e6, percentile(vals, 99) * 1e6,
                    percentile(vals, 99.9) * 1e6, sum(vals) / len(vals) * 1e6), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
