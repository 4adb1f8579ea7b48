#!/usr/bin/python3
"""Torch side of the jcomm store benchmark (run with Debian's /usr/bin/python3 and its torch).

  store_bench.py serve  --port P [--host H]
      Hosts torch's own TCPStore server (is_master=True), prints "READY <port>", and serves until
      standard input closes (the benchmark holds it open).

  store_bench.py client --port P [--host H] [--master] --op get|add --iters N --warmup W
                        --value-bytes B --out FILE
      Times N torch-client operations after W warm-up ones and writes the latencies (nanoseconds,
      int64 little-endian) to FILE; prints one summary line. With --master the process also hosts
      torch's server on P (torch client against torch server); otherwise it connects to a server
      that is already there (e.g. a jcomm server).
"""
import argparse
import array
import sys
import time
from datetime import timedelta

import torch.distributed as dist


def serve(args):
    store = dist.TCPStore(args.host, args.port, None, True, timedelta(seconds=300), wait_for_workers=False)
    print("READY %d" % args.port, flush=True)
    sys.stdin.read()
    del store


def client(args):
    server = None
    if args.master:
        server = dist.TCPStore(args.host, args.port, None, True, timedelta(seconds=60), wait_for_workers=False)
    store = dist.TCPStore(args.host, args.port, None, False, timedelta(seconds=60), wait_for_workers=False)
    value = b"v" * args.value_bytes
    key = "bench/torch/%d" % args.port
    if args.op == "get":
        store.set(key, value)
        def op():
            return store.get(key)
        if op() != value:
            print("FAIL: get returned a different value", flush=True)
            sys.exit(1)
    elif args.op == "add":
        def op():
            return store.add(key, 1)
    else:
        raise SystemExit("unknown op " + args.op)
    for _ in range(args.warmup):
        op()
    lat = array.array("q", bytes(8 * args.iters))
    clock = time.perf_counter_ns
    t0 = clock()
    for i in range(args.iters):
        s = clock()
        op()
        lat[i] = clock() - s
    elapsed = clock() - t0
    if sys.byteorder != "little":
        lat.byteswap()
    with open(args.out, "wb") as f:
        lat.tofile(f)
    if args.op == "add":
        expect = args.warmup + args.iters
        got = store.add(key, 0)
        if got != expect:
            print("FAIL: add counted %d, expected %d" % (got, expect), flush=True)
            sys.exit(1)
    print("DONE op=%s iters=%d elapsed_ns=%d" % (args.op, args.iters, elapsed), flush=True)
    del store
    del server


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["serve", "client"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--master", action="store_true")
    p.add_argument("--op", default="get")
    p.add_argument("--iters", type=int, default=20000)
    p.add_argument("--warmup", type=int, default=2000)
    p.add_argument("--value-bytes", type=int, default=64)
    p.add_argument("--out")
    args = p.parse_args()
    if args.mode == "serve":
        serve(args)
    else:
        client(args)


if __name__ == "__main__":
    main()
