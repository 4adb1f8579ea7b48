#!/usr/bin/python3
"""torch 1.13 counterpart of the Llama example's decode (examples/llama): the same model file, the same
sharding as vLLM (and the Java decoder) and the same greedy requests, on torch.distributed with gloo, to set
its per-token figures beside jcomm's.

usage: /usr/bin/python3 scripts/torch_llama_tp.py --model DIR [--tp T] [--pp P] [--prompts N] [--tokens T]
                                                  [--warmup W] [--threads K]

Spawns T x P ranks (torch.multiprocessing, vLLM's layout: TP varies fastest) with a gloo world group, TP
groups and PP groups. Each rank loads its shard of DIR/model.safetensors (llama_reference.py's reader):
column-parallel QKV and gate/up, row-parallel o_proj and down_proj followed by an all_reduce over TP, a
vocabulary-parallel embedding (zeros outside the rank's range, all_reduce) and LM head (each rank's slice of
the logits, all_gather over TP); PP stages hand {hidden_states, residual} on with send/recv and the last
stage broadcasts the sampled token over PP. Each rank computes with --threads intra-op threads (default 1:
the Java decoder computes on one thread per rank).

Request i is llama_reference.py's (the Java demo's): a prompt of 4 + 3i tokens, T + 8 (i mod 2) new tokens.
After --warmup tokens of one request, every request is run; rank 0 prints
  TOKENS i t0 t1 ...
  RESULT tp=T pp=P tokens=N p50_ms=X p99_ms=Y tokens_per_s=Z comm_share=S
where the p50/p99 are of rank 0's decode steps (one token each), tokens_per_s is decode tokens over decode
time, and comm_share the time inside torch.distributed calls over the decode time, summed over all ranks
(waiting for peers included, as the Java demo counts it).
"""
import argparse
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_reference as ref  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Clock:
    def __init__(self):
        self.seconds = 0.0

    def call(self, fn, *args, **kwargs):
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        self.seconds += time.perf_counter() - t0
        return out


class Shard:
    def __init__(self, cfg, w, tp_rank, tp, pp_rank, pp, tp_group, pp_group, pp_ranks, clock, capacity):
        self.h = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.kvh = cfg.get("num_key_value_heads") or self.heads
        self.hd = cfg.get("head_dim") or self.h // self.heads
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        theta = float(cfg.get("rope_theta", 10000.0))
        self.vocab = cfg["vocab_size"]
        self.tp_rank, self.tp, self.pp_rank, self.pp = tp_rank, tp, pp_rank, pp
        self.tp_group, self.pp_group, self.pp_ranks = tp_group, pp_group, pp_ranks
        self.clock = clock
        L = cfg["num_hidden_layers"]
        self.first_layer = pp_rank * (L // pp)
        self.end_layer = L if pp_rank == pp - 1 else self.first_layer + L // pp
        self.qh, self.kv = self.heads // tp, self.kvh // tp
        ff = cfg["intermediate_size"] // tp
        self.per = (self.vocab + tp - 1) // tp
        self.v0 = min(self.vocab, tp_rank * self.per)
        self.vn = min(self.vocab, self.v0 + self.per) - self.v0
        q, kv = self.qh * self.hd, self.kv * self.hd
        self.layers = []
        for i in range(self.first_layer, self.end_layer):
            p = "model.layers.%d." % i
            r = tp_rank
            self.layers.append({
                "in": w[p + "input_layernorm.weight"],
                "qkv": torch.cat((w[p + "self_attn.q_proj.weight"][r * q:(r + 1) * q],
                                  w[p + "self_attn.k_proj.weight"][r * kv:(r + 1) * kv],
                                  w[p + "self_attn.v_proj.weight"][r * kv:(r + 1) * kv])).t().contiguous(),
                "o": w[p + "self_attn.o_proj.weight"][:, r * q:(r + 1) * q].t().contiguous(),
                "post": w[p + "post_attention_layernorm.weight"],
                "gate_up": torch.cat((w[p + "mlp.gate_proj.weight"][r * ff:(r + 1) * ff],
                                      w[p + "mlp.up_proj.weight"][r * ff:(r + 1) * ff])).t().contiguous(),
                "down": w[p + "mlp.down_proj.weight"][:, r * ff:(r + 1) * ff].t().contiguous(),
                "k": torch.zeros(self.kv, capacity, self.hd),
                "v": torch.zeros(self.kv, capacity, self.hd),
            })
        self.ff = ff
        if pp_rank == 0:
            self.embed = w["model.embed_tokens.weight"][self.v0:self.v0 + self.vn].contiguous()
        if pp_rank == pp - 1:
            self.norm = w["model.norm.weight"]
            head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") or "lm_head.weight" not in w \
                else w["lm_head.weight"]
            self.head = torch.zeros(self.per, self.h)
            self.head[:self.vn] = head[self.v0:self.v0 + self.vn]
            self.head = self.head.t().contiguous()
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, self.hd, 2).float() / self.hd))

    def all_reduce(self, x):
        if self.tp > 1:
            self.clock.call(dist.all_reduce, x, group=self.tp_group)
        return x

    def rms(self, x, weight):
        return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def rope(self, x, positions):
        freqs = torch.outer(positions.float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        half = x.shape[-1] // 2
        rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * emb.cos()[None] + rot * emb.sin()[None]

    def step(self, tokens, start):
        T = len(tokens)
        positions = torch.arange(start, start + T)
        if self.pp_rank == 0:
            ids = torch.tensor(tokens)
            inside = (ids >= self.v0) & (ids < self.v0 + self.vn)
            x = torch.zeros(T, self.h)
            x[inside] = self.embed[ids[inside] - self.v0]
            x = self.all_reduce(x)
            residual = None
        else:
            x = torch.empty(T, self.h)
            residual = torch.empty(T, self.h)
            prev = self.pp_ranks[self.pp_rank - 1]
            self.clock.call(dist.recv, x, src=prev)
            self.clock.call(dist.recv, residual, src=prev)
        q, kv = self.qh * self.hd, self.kv * self.hd
        for l in self.layers:
            residual = x if residual is None else residual + x
            y = self.rms(residual, l["in"])
            qkv = y @ l["qkv"]
            qq = qkv[:, :q].view(T, self.qh, self.hd).transpose(0, 1)
            kk = qkv[:, q:q + kv].view(T, self.kv, self.hd).transpose(0, 1)
            vv = qkv[:, q + kv:].view(T, self.kv, self.hd).transpose(0, 1)
            qq, kk = self.rope(qq, positions), self.rope(kk, positions)
            l["k"][:, start:start + T] = kk
            l["v"][:, start:start + T] = vv
            S = start + T
            rep = self.qh // self.kv
            keys = l["k"][:, :S].repeat_interleave(rep, dim=0)
            values = l["v"][:, :S].repeat_interleave(rep, dim=0)
            scores = (qq @ keys.transpose(1, 2)) / math.sqrt(self.hd)
            mask = torch.arange(S)[None, :] > positions[:, None]
            scores = scores.masked_fill(mask[None], float("-inf"))
            attn = (torch.softmax(scores, dim=-1) @ values).transpose(0, 1).reshape(T, q)
            x = self.all_reduce(attn @ l["o"])
            residual = residual + x
            y = self.rms(residual, l["post"])
            gu = y @ l["gate_up"]
            x = self.all_reduce((torch.nn.functional.silu(gu[:, :self.ff]) * gu[:, self.ff:]) @ l["down"])
        tok = torch.zeros(1, dtype=torch.long)
        last = self.pp_ranks[-1]
        if self.pp_rank < self.pp - 1:
            nxt = self.pp_ranks[self.pp_rank + 1]
            self.clock.call(dist.send, x.contiguous(), dst=nxt)
            self.clock.call(dist.send, residual.contiguous(), dst=nxt)
        else:
            y = self.rms((residual + x)[-1:], self.norm)
            local = y @ self.head  # [1, per]
            if self.tp > 1:
                parts = [torch.empty_like(local) for _ in range(self.tp)]
                self.clock.call(dist.all_gather, parts, local, group=self.tp_group)
                local = torch.cat(parts, dim=-1)
            tok[0] = int(torch.argmax(local[0, :self.vocab]))
        if self.pp > 1:
            self.clock.call(dist.broadcast, tok, src=last, group=self.pp_group)
        return int(tok[0])


def percentile(sorted_vals, p):
    if not sorted_vals:
        return 0.0
    k = max(0, min(len(sorted_vals) - 1, int(math.ceil(p / 100.0 * len(sorted_vals))) - 1))
    return sorted_vals[k]


def worker(rank, args, port, out_q):
    torch.set_num_threads(args.threads)
    world = args.tp * args.pp
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    tp_groups = [dist.new_group(list(range(s * args.tp, (s + 1) * args.tp))) for s in range(args.pp)]
    pp_groups = [dist.new_group(list(range(t, world, args.tp))) for t in range(args.tp)]
    tp_rank, pp_rank = rank % args.tp, rank // args.tp
    cfg, w = ref.load_model(args.model)
    reqs = ref.requests(args.prompts, args.tokens, cfg["vocab_size"])
    warm = ref.requests(1, args.warmup, cfg["vocab_size"]) if args.warmup > 0 else []
    capacity = max(len(p) + n for p, n in reqs + warm)
    clock = Clock()
    shard = Shard(cfg, w, tp_rank, args.tp, pp_rank, args.pp, tp_groups[pp_rank], pp_groups[tp_rank],
                  list(range(tp_rank, world, args.tp)), clock, capacity)
    del w
    steps, comm, tokens = [], 0.0, []
    with torch.no_grad():
        for phase, rs in (("warmup", warm), ("run", reqs)):
            for prompt, max_new in rs:
                gen = [shard.step(prompt, 0)]
                pos = len(prompt)
                while len(gen) < max_new:
                    c0 = clock.seconds
                    t0 = time.perf_counter()
                    gen.append(shard.step([gen[-1]], pos))
                    dt = time.perf_counter() - t0
                    pos += 1
                    if phase == "run":
                        steps.append(dt)
                        comm += clock.seconds - c0
                if phase == "run":
                    tokens.append(gen)
    out_q.put((rank, steps, comm, tokens))
    dist.barrier()
    dist.destroy_process_group()


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    world = args.tp * args.pp
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, args, port, q)) for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    for _ in range(world):
        rank, steps, comm, tokens = q.get(timeout=600)
        results[rank] = (steps, comm, tokens)
    for p in procs:
        p.join(60)
    steps0, _, tokens0 = results[0]
    for i, t in enumerate(tokens0):
        print("TOKENS %d %s" % (i, " ".join(str(x) for x in t)))
    s = sorted(steps0)
    total_step = sum(sum(r[0]) for r in results.values())
    total_comm = sum(r[1] for r in results.values())
    print("RESULT tp=%d pp=%d tokens=%d p50_ms=%.2f p99_ms=%.2f tokens_per_s=%.1f comm_share=%.3f"
          % (args.tp, args.pp, len(s), percentile(s, 50) * 1e3, percentile(s, 99) * 1e3,
             len(s) / max(1e-9, sum(s)), total_comm / max(1e-9, total_step)))


if __name__ == "__main__":
    main(sys.argv[1:])
