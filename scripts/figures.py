#!/usr/bin/python3
"""Re-measures every figure the README quotes, each beside torch 1.13 in the same minutes, RUNS times
(default 3), and prints the median and the min-max of each, the ratio to torch, the date, the commit and
this host's memcpy bandwidth, as the README's table.

usage: scripts/figures.sh [--runs N] [--only NAME,...] [--list] [--raw DIR]

--raw DIR keeps every command's whole output in DIR (the pipeline's mean and tail columns, every size).

Each round runs every figure once, jcomm then torch, so that both sides of a ratio share the round's
conditions; the ratio column is the median of the per-round ratios. Figures move between hosts of the
same kind (memcpy 13-20 GB/s): compare ratios, and quote a figure with its host's memcpy. Needs a built
checkout (mvn -B install), Debian's /usr/bin/python3 with torch, and about 20 minutes for 3 runs.
"""
import argparse
import datetime
import os
import re
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"
RAW = {"dir": None, "n": 0}


def run(cmd, timeout=900):
    env = dict(os.environ, JCOMM_NO_BUILD="1")
    p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if RAW["dir"]:
        RAW["n"] += 1
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(os.path.basename(c) for c in cmd[:3]))
        with open(os.path.join(RAW["dir"], "%03d-%s.txt" % (RAW["n"], name)), "w") as f:
            f.write(" ".join(cmd) + "\n" + p.stdout)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s" % (" ".join(cmd), p.returncode, p.stdout[-3000:]))
    return p.stdout


def table_row(out, first, col):
    """Column `col` of the first table row whose first column is `first` (commbench's and torch_gloo_bench's)."""
    for line in out.splitlines():
        f = line.split()
        if len(f) > col and f[0] == str(first):
            return float(f[col])
    raise RuntimeError("no row %s in:\n%s" % (first, out[-2000:]))


class Pipeline:
    """One `commbench pipeline --torch` run gives four figures: jcomm plain and reuse, torch alloc and prealloc."""
    cache = {}

    def __init__(self, tp, pp, hidden):
        self.tp, self.pp, self.hidden = tp, pp, hidden

    def measure(self, round_no):
        key = (self.tp, self.pp, round_no)
        if key not in Pipeline.cache:
            sizes = ",".join(str(h) for h in PIPELINE_SIZES[(self.tp, self.pp)])
            out = run(["bin/commbench", "pipeline", "--tp", str(self.tp), "--pp", str(self.pp), "--hidden", sizes,
                       "--torch", "--bands"], timeout=1800)
            rows = {}
            inside = False
            for line in out.splitlines():
                if line.startswith("# side by side"):
                    inside = True
                    continue
                f = line.split()
                if inside and len(f) >= 6 and f[0].isdigit():
                    rows[int(f[0])] = [float(x) for x in f[2:6]]
            Pipeline.cache[key] = rows
        return Pipeline.cache[key][self.hidden]


PIPELINE_SIZES = {(1, 2): [262144, 1048576], (2, 2): [16384]}


def pipeline(tp, pp, hidden, reuse):
    p = Pipeline(tp, pp, hidden)
    # side by side: jcomm plain, jcomm reuse, torch alloc, torch prealloc
    return (lambda r: p.measure(r)[1 if reuse else 0]), (lambda r: p.measure(r)[3])


def op(name, size, col, extra, torch_extra):
    size_arg = ["-b", size, "-e", size]

    def j(_):
        return table_row(run(["bin/commbench", name] + size_arg + extra), parse_size(size), col)

    def t(_):
        # torch's ranks as torchrun starts them (unbound); commbench binds its two ranks as commrun does
        return table_row(run([PY, "scripts/torch_gloo_bench.py", name, "--nproc", "2"] + size_arg + torch_extra),
                         parse_size(size), col)
    return j, t


def parse_size(s):
    mul = {"K": 1 << 10, "M": 1 << 20}.get(s[-1], 1)
    return int(s[:-1]) * mul if mul > 1 else int(s)


def crowd():
    cache = {}

    def both(r):
        if r not in cache:
            out = run(["scripts/store_crowd.sh", "1", "4000"], timeout=1800)
            vals = {}
            for line in out.splitlines():
                m = re.match(r"(jcomm|torch) n=4000 round=1: .* seconds=([0-9.]+)", line)
                if m:
                    vals[m.group(1)] = float(m.group(2))
            if len(vals) != 2:
                raise RuntimeError("store_crowd.sh printed no figures:\n" + out[-2000:])
            cache[r] = vals
        return cache[r]
    return (lambda r: both(r)["jcomm"]), (lambda r: both(r)["torch"])


def transfer():
    cache = {}

    def both(r):
        if r not in cache:
            out = run(["bin/commbench", "transfer", "--torch"], timeout=1800)
            cache[r] = table_row(out.split("# beside torch")[1], 16777216, 1), table_row(
                out.split("# beside torch")[1], 16777216, 2)
        return cache[r]
    return (lambda r: both(r)[1]), (lambda r: both(r)[0])


def cold_start():
    def j(_):
        out = run(["scripts/cold_start.sh", "-n", "3"])
        return float(re.search(r"median ([0-9.]+) s", out).group(1))

    def t(_):
        out = run([PY, "scripts/torch_cold_start.py", "-n", "3"])
        return float(re.search(r"median ([0-9.]+) s", out).group(1))
    return j, t


def mq():
    def j(_):
        out = run(["bin/commbench", "mq", "--readers", "1"])
        for line in out.splitlines():
            f = line.split()
            if len(f) > 3 and f[0] == "100":
                return float(f[3])
        raise RuntimeError("no 100 B row:\n" + out[-2000:])
    return j, None


# name, unit, higher is better, (jcomm, torch) measurers, command shown
FIGURES = [
    ("pipeline-1m-plain", "pipeline TP1 x PP2, 1 MiB, `pp.recvTensorDict()`, steps/s", "", True,
     pipeline(1, 2, 262144, False), "bin/commbench pipeline --tp 1 --pp 2 --torch"),
    ("pipeline-1m-reuse", "pipeline TP1 x PP2, 1 MiB, previous dict handed back, steps/s", "", True,
     pipeline(1, 2, 262144, True), "bin/commbench pipeline --tp 1 --pp 2 --torch"),
    ("pipeline-4m-plain", "pipeline TP1 x PP2, 4 MiB, `pp.recvTensorDict()`, steps/s", "", True,
     pipeline(1, 2, 1048576, False), "bin/commbench pipeline --tp 1 --pp 2 --torch"),
    ("pipeline-4m-reuse", "pipeline TP1 x PP2, 4 MiB, previous dict handed back, steps/s", "", True,
     pipeline(1, 2, 1048576, True), "bin/commbench pipeline --tp 1 --pp 2 --torch"),
    ("pipeline-tp2pp2-64k", "pipeline TP2 x PP2 (4 JVMs), 64 KiB, `recvTensorDict`, steps/s", "", True,
     pipeline(2, 2, 16384, False), "bin/commbench pipeline --tp 2 --pp 2 --torch"),
    ("sendrecv-256k", "send/recv exchange 256 KiB, 2 ranks", " µs", False,
     op("sendrecv", "256K", 3, ["-w", "200", "-n", "1000"], ["-w", "200", "-n", "1000"]),
     "bin/commbench sendrecv -b 256K -e 256K -w 200 -n 1000"),
    ("alltoall-16m", "all-to-all 16 MiB, 2 ranks", " µs", False,
     op("alltoall", "16M", 3, ["-w", "20", "-n", "200"], ["-w", "20", "-n", "200"]),
     "bin/commbench alltoall -b 16M -e 16M -w 20 -n 200"),
    ("alltoall-64k", "all-to-all 64 KiB, 2 ranks", " µs", False,
     op("alltoall", "64K", 3, [], ["-w", "1000", "-n", "2000"]), "bin/commbench alltoall -b 64K -e 64K"),
    ("allreduce-64m", "all-reduce f32 64 MiB, 2 ranks, bus bandwidth", " GB/s", True,
     op("allreduce", "64M", 5, ["-w", "10", "-n", "30"], ["-w", "10", "-n", "30"]),
     "bin/commbench allreduce -b 64M -e 64M -w 10 -n 30"),
    ("allreduce-1k", "all-reduce f32 1 KiB, 2 ranks (default warm-up and iterations)", " µs", False,
     op("allreduce", "1K", 3, [], ["-w", "1000", "-n", "2000"]), "bin/commbench allreduce -b 1K -e 1K"),
    ("barrier", "barrier, 2 ranks, p50", " µs", False,
     op("barrier", "0", 3, ["-n", "10000"], ["-w", "1000", "-n", "10000"]), "bin/commbench barrier -n 10000"),
    ("mq", "message queue 100 B one way, 1 local reader, p50", " µs", False, mq(), "bin/commbench mq --readers 1"),
    ("transfer-16m", "one-sided write 16 MiB, one host, awaited (torch: send/recv)", " GB/s", True, transfer(),
     "bin/commbench transfer --torch"),
    ("rendezvous-4000", "rendezvous of 4,000 torch 1.13 clients", " s", False, crowd(),
     "scripts/store_crowd.sh 1 4000"),
    ("cold-start", "cold start: 4 JVMs launched to every TP2 x PP2 group ready", " s", False, cold_start(),
     "scripts/cold_start.sh -n 3"),
]


def memcpy_gbps():
    import numpy as np
    a = np.ones(64 << 20, dtype=np.uint8)
    b = np.empty_like(a)
    np.copyto(b, a)
    t0 = time.perf_counter()
    for _ in range(20):
        np.copyto(b, a)
    return 20 * a.nbytes / (time.perf_counter() - t0) / 1e9


def fmt(vals, unit):
    if not vals:
        return "-"
    m = statistics.median(vals)
    digits = 0 if m >= 100 else 1 if m >= 1 else 2
    f = "{:,.%df}" % digits
    return "%s%s (%s-%s)" % (f.format(m), unit, f.format(min(vals)), f.format(max(vals)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--raw", default="")
    args = ap.parse_args()
    if args.raw:
        os.makedirs(args.raw, exist_ok=True)
        RAW["dir"] = args.raw
    if args.list:
        for f in FIGURES:
            print(f[0], "-", f[1])
        return 0
    only = set(x for x in args.only.split(",") if x)
    figures = [f for f in FIGURES if not only or f[0] in only]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True).stdout.strip()
    bw = memcpy_gbps()
    start = datetime.datetime.now(datetime.timezone.utc)
    print("# figures: %d runs, %s UTC, commit %s, %d CPUs, memcpy %.1f GB/s" % (
        args.runs, start.strftime("%Y-%m-%d %H:%M"), commit, os.cpu_count(), bw), flush=True)
    results = {f[0]: ([], [], []) for f in figures}
    for r in range(1, args.runs + 1):
        for name, label, unit, higher, (j, t), cmd in figures:
            jv = j(r)
            tv = t(r) if t else None
            js, ts, rs = results[name]
            js.append(jv)
            if tv is not None:
                ts.append(tv)
                rs.append(jv / tv if higher else tv / jv)
            print("# round %d %-20s jcomm %s torch %s" % (r, name, jv, "-" if tv is None else tv), flush=True)
    print()
    print("| figure | jcomm median (min-max) | torch 1.13 median (min-max) | jcomm vs torch | command |")
    print("|---|---:|---:|---:|---|")
    for name, label, unit, higher, _, cmd in figures:
        js, ts, rs = results[name]
        ratio = ("%.1fx" % statistics.median(rs)) if rs else "-"
        print("| %s | %s | %s | %s | `%s` |" % (label, fmt(js, unit), fmt(ts, unit), ratio, cmd))
    print()
    print("%s, commit %s, this 2-core host (memcpy %.1f GB/s), %d runs each, torch in the same rounds; "
          "\"jcomm vs torch\" is the median of the per-round ratios (x faster)." % (
              start.strftime("%Y-%m-%d"), commit, bw, args.runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
