#!/usr/bin/python3
"""Cold start of torch.distributed (gloo), measured as the jcomm demo measures its own: from launching
the rank processes to every rank having its groups.

usage: /usr/bin/python3 scripts/torch_cold_start.py [--tp 2] [--pp 2] [-n RUNS]

Each run records the time, then starts TP x PP processes at once (`python3 this --worker`, with
torchrun's environment: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE); each imports torch, calls
init_process_group("gloo", env://), creates every TP group and every PP group with new_group (vLLM's
layout: TP groups of consecutive ranks, PP groups strided by TP; every rank creates every group, as
torch requires), runs dist.barrier() and reports the time since the launch. A run's figure is its
slowest rank's; the script prints every run's figure and the median. The parent's own start is not
counted (as commrun's is not counted by the demo).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

LAUNCH_ENV = "TORCH_COLD_START_LAUNCH_EPOCH"


def worker():
    launched = float(os.environ[LAUNCH_ENV])
    import torch.distributed as dist  # part of the cold start, as class loading is for a JVM

    imported = time.time() - launched
    tp, pp = int(os.environ["COLD_TP"]), int(os.environ["COLD_PP"])
    dist.init_process_group("gloo", init_method="env://")
    for start in range(0, tp * pp, tp):
        dist.new_group(list(range(start, start + tp)))
    for t in range(tp):
        dist.new_group(list(range(t, tp * pp, tp)))
    dist.barrier()
    ready = time.time() - launched
    print("READY %d %.4f %.4f" % (dist.get_rank(), ready, imported), flush=True)
    dist.destroy_process_group()


def one_run(tp, pp):
    world = tp * pp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    launched = time.time()
    procs = []
    for r in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE=str(world),
                   LOCAL_RANK=str(r), COLD_TP=str(tp), COLD_PP=str(pp))
        env[LAUNCH_ENV] = repr(launched)
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"], env=env,
                                      stdout=subprocess.PIPE, text=True))
    ready, imported = [], []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        if p.returncode != 0:
            raise SystemExit("a rank exited with %d" % p.returncode)
        for line in out.splitlines():
            if line.startswith("READY "):
                ready.append(float(line.split()[2]))
                imported.append(float(line.split()[3]))
    if len(ready) != world:
        raise SystemExit("only %d of %d ranks reported" % (len(ready), world))
    return max(ready), max(imported)


def main():
    if "--worker" in sys.argv:
        worker()
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--pp", type=int, default=2)
    p.add_argument("-n", "--runs", type=int, default=5)
    args = p.parse_args()
    import torch

    print("# torch_cold_start: torch %s gloo, TP=%d x PP=%d (%d processes), %d runs"
          % (torch.__version__, args.tp, args.pp, args.tp * args.pp, args.runs), flush=True)
    figures = []
    for i in range(args.runs):
        f, imported = one_run(args.tp, args.pp)
        figures.append(f)
        print("run %d: all groups ready %.2f s after launch (every rank had imported torch after %.2f s; load %s)"
              % (i + 1, f, imported, " ".join(open("/proc/loadavg").read().split()[:3])), flush=True)
    print("median %.2f s (min %.2f, max %.2f)" % (statistics.median(figures), min(figures), max(figures)))


if __name__ == "__main__":
    main()
