#!/usr/bin/python3
"""Torch (1.13) side of jcomm's store interoperability tests.

usage: torch_store.py HOST PORT MODE [ARGS]

Every check prints "OK <name>" or "MISMATCH <name> ..." and a mismatch exits with status 1, so
both sides assert: the Java test checks the exit status and the lines, and its own values.
Phases synchronise with the Java test through lines on stdout (the test waits for them) and on
stdin (the script waits for them).

modes
  ops       torch client against a (jcomm) server: every store operation, a wait that times out
            followed by more commands, a multi-key wait woken by the Java side
  refused   torch client against a server with a job token: must fail (exit 0 when it does)
  worker W  torch client with world_size=W (adds 1 to init/ like any torch worker), then
            exchanges keys with a Java rank
  master W  torch hosts the server (is_master=True, world_size=W, waits for W workers on init/),
            then checks what the Java client wrote
"""
import sys
import time
from datetime import timedelta

import torch.distributed as dist


def check(name, got, want):
    if got != want:
        print("MISMATCH %s: got %r want %r" % (name, got, want), flush=True)
        sys.exit(1)
    print("OK %s" % name, flush=True)


def expect_line(want):
    line = sys.stdin.readline().strip()
    check("stdin " + want, line, want)


def ops(host, port):
    s = dist.TCPStore(host, port, None, False, timedelta(seconds=30))
    check("get from java", s.get("from_java"), b"hello from java")
    base = s.num_keys()  # keys present before (from_java, and whatever else the test left)
    s.set("from_torch", b"hello from torch")
    check("add", s.add("counter", 5), 5)
    check("add negative", s.add("counter", -2), 3)
    check("compare_set create", s.compare_set("cas", "", "first"), b"first")
    check("compare_set mismatch", s.compare_set("cas", "wrong", "second"), b"first")
    check("compare_set swap", s.compare_set("cas", "first", "second"), b"second")
    check("compare_set missing", s.compare_set("nokey", "exp", "des"), b"exp")
    s.set("doomed", b"x")
    check("delete_key", s.delete_key("doomed"), True)
    check("delete_key again", s.delete_key("doomed"), False)
    check("num_keys", s.num_keys(), base + 3)
    s.wait(["from_java", "from_torch"])
    print("OK wait present", flush=True)
    try:
        s.wait(["late"], timedelta(milliseconds=300))
        print("MISMATCH wait did not time out", flush=True)
        sys.exit(1)
    except RuntimeError as e:
        print("OK wait timed out (%s)" % e, flush=True)
    # torch 1.13 sends nothing when its wait times out; this next command is how the server learns
    # that the wait was abandoned, and it must drop it
    check("add after timeout", s.add("counter", 1), 4)
    print("WAIT_TIMED_OUT", flush=True)
    expect_line("GO")  # the Java side has set "late" meanwhile
    # a server that had kept the abandoned wait would have sent STOP_WAITING when "late" was set,
    # and that stale byte would now shift every reply
    check("add after the late key was set", s.add("counter", 1), 5)
    check("get late", s.get("late"), b"now here")
    check("num_keys after", s.num_keys(), base + 4)
    print("WAITING", flush=True)
    s.wait(["k1", "k2"], timedelta(seconds=20))
    check("k1", s.get("k1"), b"v1")
    check("k2", s.get("k2"), b"v2")
    check("counter seen by torch", s.add("counter", 0), 15)
    print("DONE", flush=True)


def refused(host, port):
    try:
        s = dist.TCPStore(host, port, None, False, timedelta(seconds=5))
        s.set("x", b"y")
        v = s.get("x")
        print("MISMATCH a torch client was served by a token server: %r" % v, flush=True)
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - any failure is the expected outcome
        print("REFUSED %s: %s" % (type(e).__name__, e), flush=True)


def worker(host, port, world):
    s = dist.TCPStore(host, port, world, False, timedelta(seconds=30))
    s.set("torch_worker", b"joined")
    check("java rank value", s.get("java_rank0"), b"hosted by java")
    s.wait(["java_done"], timedelta(seconds=30))
    s.set("torch_bye", b"1")
    print("DONE", flush=True)


def master(host, port, world):
    # the constructor returns once `world` workers (this one included) added 1 to init/
    s = dist.TCPStore(host, port, world, True, timedelta(seconds=60))
    s.set("from_torch", b"hello from torch")
    print("READY", flush=True)
    s.wait(["from_java"], timedelta(seconds=30))
    check("from java", s.get("from_java"), b"hello from java")
    expect_line("LATER")
    time.sleep(0.2)
    s.set("later", b"set later by torch")
    s.wait(["java_done"], timedelta(seconds=30))
    check("appended by java", s.get("appended"), b"abc")
    check("multi_set by java m1", s.get("m1"), b"one")
    check("multi_set by java m2", s.get("m2"), b"two")
    check("counter by java", s.add("counter", 0), 10)
    check("cas by java", s.get("cas"), b"new")
    print("DONE", flush=True)
    sys.stdin.read()  # keep serving until the Java side is finished


def main():
    host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "ops":
        ops(host, port)
    elif mode == "refused":
        refused(host, port)
    elif mode == "worker":
        worker(host, port, int(sys.argv[4]))
    elif mode == "master":
        master(host, port, int(sys.argv[4]))
    else:
        raise SystemExit("unknown mode " + mode)


if __name__ == "__main__":
    main()
