#!/usr/bin/python3
"""torch.distributed (gloo) counterpart of `bin/commbench transfer`: the same bytes moved one way.

usage: /usr/bin/python3 scripts/torch_transfer_bench.py --sizes 4096,65536,... [--seconds S]

Spawns two ranks on 127.0.0.1 (a gloo world group). For each size, one op is what a jcomm write
does, "issue, await until the bytes are in the peer's memory": rank 0 sends a uint8 tensor of SIZE
bytes (dist.send), rank 1 receives it into a tensor allocated once (dist.recv) and sends an 8-byte
acknowledgement back, which rank 0 receives. Mean seconds per op over about S/3 seconds per trial
(an op count rank 0 calibrates and both ranks run), best of three trials, after a warm-up. The first and last byte of every receive are checked.

Prints per size: "ROW bytes=B seconds_per_op=T gbps=G", after "# ..." header lines.
"""
import argparse
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from _ranks import die_with_parent

TRIALS = 3


def worker(rank, sizes, seconds, port, queue):
    die_with_parent()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2)
    ack = torch.zeros(1, dtype=torch.long)
    count = torch.zeros(1, dtype=torch.long)
    for size in sizes:
        buf = torch.empty(size, dtype=torch.uint8)
        if rank == 0:
            buf.copy_(torch.arange(size, dtype=torch.int64).to(torch.uint8))

            def op():
                dist.send(buf, dst=1)
                dist.recv(ack, src=1)
        else:
            first, last = 0, (size - 1) % 256

            def op():
                dist.recv(buf, src=0)
                if int(buf[0]) != first or int(buf[-1]) != last:
                    raise SystemExit("torch transfer bench: wrong bytes received at size %d" % size)
                dist.send(ack, dst=0)
        # rank 0 calibrates (10 ops, then a third of a trial's ops as warm-up), then tells rank 1
        # how many ops each trial has; both run exactly that many
        for _ in range(10):
            op()
        if rank == 0:
            t0 = time.perf_counter()
            for _ in range(10):
                op()
            per = (time.perf_counter() - t0) / 10
            count[0] = max(10, int(seconds / TRIALS / per))
            dist.send(count, dst=1)
        else:
            for _ in range(10):
                op()
            dist.recv(count, src=0)
        n = int(count[0])
        for _ in range(n // 3):
            op()
        best = float("inf")
        for _ in range(TRIALS):
            t0 = time.perf_counter()
            for _ in range(n):
                op()
            best = min(best, (time.perf_counter() - t0) / n)
        if rank == 0:
            queue.put((size, best))
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    """A port below the ephemeral range (no client socket takes it meanwhile), free on every address."""
    import random
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError):
        low = 0
    for _ in range(100):
        if low <= 11000:
            break
        port = random.randrange(10000, low)
        with socket.socket() as s:
            try:
                s.bind(("", port))
                return port
            except OSError:
                continue
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--seconds", type=float, default=0.6)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print("# torch %s gloo send/recv, 2 ranks on 127.0.0.1, one op = SIZE bytes one way + 8-byte ack" % torch.__version__)
    sys.stdout.flush()
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.spawn(worker, args=(sizes, args.seconds, free_port(), queue), nprocs=2, join=True)
    for _ in sizes:
        size, t = queue.get(timeout=5)
        print("ROW bytes=%d seconds_per_op=%.9f gbps=%.4f" % (size, t, size / t / 1e9))


if __name__ == "__main__":
    main()
