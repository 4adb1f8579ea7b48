"""A PyTorch 1.13 rank of a gloo group shared with Java ranks (io.jcomm.it.gloo.TorchGlooInteropIT).

Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torch's env:// rendezvous),
GLOO_SOCKET_IFNAME (e.g. "lo" or "lo,lo"). Runs the same sequence as the Java ranks and asserts
every result; prints "TORCH_OK seq=<n>" and exits 0 when all matched, exits 1 otherwise.
"""
import os
import signal
import sys
from datetime import timedelta

signal.alarm(int(os.environ.get("TORCH_RANK_ALARM_S", "150")))  # never outlive a stuck test

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def check(what, got, want):
    if not torch.equal(got, want):
        print(f"TORCH_MISMATCH {what}: got {got.tolist()} want {want.tolist()}", flush=True)
        sys.exit(1)
    print(f"torch {what} ok: {got.tolist()}", flush=True)


def main():
    rank = int(os.environ["RANK"])
    size = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=60))
    assert dist.get_rank() == rank and dist.get_world_size() == size
    seq = dist.distributed_c10d._get_default_group()._get_sequence_number_for_group()
    print(f"torch joined rank={rank} size={size} seq={seq}", flush=True)
    ranks = range(size)

    # 1. all_reduce SUM f32
    t = torch.tensor([rank + 1.0, 2.0 * (rank + 1), 0.5], dtype=torch.float32)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    check("all_reduce sum f32", t, torch.tensor([sum(r + 1.0 for r in ranks),
                                                 sum(2.0 * (r + 1) for r in ranks), 0.5 * size]))

    # 2. broadcast i64 from rank 0
    b = torch.tensor([10, -20, 2 ** 40]) if rank == 0 else torch.zeros(3, dtype=torch.int64)
    dist.broadcast(b, src=0)
    check("broadcast i64", b, torch.tensor([10, -20, 2 ** 40], dtype=torch.int64))

    # 3. barrier
    dist.barrier()
    print("torch barrier ok", flush=True)

    # 4. all_gather i32
    mine = torch.tensor([rank * 10, rank * 10 + 1, rank * 10 + 2], dtype=torch.int32)
    out = [torch.zeros(3, dtype=torch.int32) for _ in ranks]
    dist.all_gather(out, mine)
    check("all_gather i32", torch.stack(out),
          torch.tensor([[r * 10, r * 10 + 1, r * 10 + 2] for r in ranks], dtype=torch.int32))

    # 5. send/recv with tags between rank 0 and the last rank
    if rank == 0:
        dist.send(torch.tensor([1.5, 2.5, -3.25], dtype=torch.float64), dst=size - 1, tag=7)
        back = torch.zeros(3, dtype=torch.float64)
        dist.recv(back, src=size - 1, tag=8)
        check("recv f64 tag 8", back, torch.tensor([3.0, 5.0, -6.5], dtype=torch.float64))
    elif rank == size - 1:
        got = torch.zeros(3, dtype=torch.float64)
        dist.recv(got, src=0, tag=7)
        check("recv f64 tag 7", got, torch.tensor([1.5, 2.5, -3.25], dtype=torch.float64))
        dist.send(got * 2, dst=0, tag=8)
        print("torch send tag 8 ok", flush=True)

    # 6. all_reduce MAX i32
    m = torch.tensor([rank * 3, -rank, 7], dtype=torch.int32)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    check("all_reduce max i32", m, torch.tensor([(size - 1) * 3, 0, 7], dtype=torch.int32))

    # 7. all_reduce SUM f16 (reduced in half precision on the wire, as torch's gloo does)
    h = torch.tensor([rank + 0.5, 100.0 + rank, -0.25], dtype=torch.float16)
    dist.all_reduce(h, op=dist.ReduceOp.SUM)
    check("all_reduce sum f16", h, torch.tensor([sum(r + 0.5 for r in ranks), sum(100.0 + r for r in ranks),
                                                 -0.25 * size], dtype=torch.float16))

    dist.barrier()
    print(f"TORCH_OK seq={seq}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
