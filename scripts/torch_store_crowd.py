#!/usr/bin/python3
"""A crowd of torch TCPStore clients in one process: the rendezvous pattern of a torch job.

  torch_store_crowd.py serve --port P [--host H]
      Hosts torch's own TCPStore server (is_master=True), prints "READY <port>", serves until standard
      input closes.

  torch_store_crowd.py crowd --port P --clients N [--host H] [--prefix S] [--timeout-s T]
      Connects N torch clients (TCPStore(is_master=False): a torch 1.13 client opens two connections,
      the second one silent) to a server that is already there; each client sets its key and adds 1
      to a counter; the client whose add returns N sets the release key; then each client waits for
      the release key and gets a peer's key (client i reads client (i+1) % N's value) and checks it.
      Prints one line: "CROWD clients=N ok=K errors=E seconds=S connect_s=C" and exits 0 only when
      every client did every step with the right values.

Run with Debian's /usr/bin/python3 (its torch is 1.13). The clients run in one thread, one phase after
another (a torch client blocks in wait), so the figure is what one Python process can drive.
"""
import argparse
import resource
import sys
import time
from datetime import timedelta

import torch.distributed as dist


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def serve(args):
    store = dist.TCPStore(args.host, args.port, None, True, timedelta(seconds=300), wait_for_workers=False)
    print("READY %d" % store.port, flush=True)
    sys.stdin.read()
    del store


def crowd(args):
    limit = raise_fd_limit()
    n = args.clients
    if 2 * n + 64 > limit:
        print("CROWD clients=%d ok=0 errors=%d seconds=0 connect_s=0 (descriptor limit %d is below %d)"
              % (n, n, limit, 2 * n + 64), flush=True)
        return 1
    timeout = timedelta(seconds=args.timeout_s)
    p = args.prefix
    t0 = time.monotonic()
    clients = []
    errors = 0
    for i in range(n):
        try:
            clients.append(dist.TCPStore(args.host, args.port, None, False, timeout, wait_for_workers=False))
        except Exception as e:  # noqa: BLE001 - counted and reported
            errors += 1
            clients.append(None)
            if errors <= 5:
                print("ERROR connect %d: %s" % (i, e), flush=True)
    t_connect = time.monotonic() - t0
    ok = 0
    try:
        for i, c in enumerate(clients):
            if c is not None:
                c.set("%s/rank/%d" % (p, i), b"value-%d" % i)
        for i, c in enumerate(clients):
            if c is not None and c.add("%s/count" % p, 1) == n:
                c.set("%s/release" % p, b"go")
        for i, c in enumerate(clients):
            if c is None:
                continue
            c.wait(["%s/release" % p])
            peer = (i + 1) % n
            got = c.get("%s/rank/%d" % (p, peer))
            if got == b"value-%d" % peer:
                ok += 1
            else:
                errors += 1
                print("ERROR client %d read %r for rank %d" % (i, got, peer), flush=True)
    except Exception as e:  # noqa: BLE001 - counted and reported
        errors += 1
        print("ERROR %s: %s" % (type(e).__name__, e), flush=True)
    elapsed = time.monotonic() - t0
    print("CROWD clients=%d ok=%d errors=%d seconds=%.3f connect_s=%.3f" % (n, ok, errors, elapsed, t_connect),
          flush=True)
    del clients
    return 0 if ok == n and errors == 0 else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["serve", "crowd"])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--prefix", default="crowd")
    ap.add_argument("--timeout-s", type=float, default=60)
    args = ap.parse_args()
    if args.mode == "serve":
        serve(args)
        return 0
    return crowd(args)


if __name__ == "__main__":
    sys.exit(main())
