#!/usr/bin/python3
"""The torch 1.13 reference of the Llama decoder in examples/llama: a seeded model written as safetensors,
and its greedy continuations, unsharded, in float32.

usage:
  /usr/bin/python3 scripts/llama_reference.py generate --out DIR [--preset test|demo] [--seed S]
        [--dtype f32|f16|bf16] [--tie] [--hidden H --layers L --heads N --kv-heads K --intermediate I
        --vocab V --rope-theta T --eps E]
  /usr/bin/python3 scripts/llama_reference.py reference --model DIR --out FILE.json
        [--prompts N] [--tokens T] [--logits-steps K]
  /usr/bin/python3 scripts/llama_reference.py generate --out DIR ... --reference FILE.json [--prompts ...]

generate writes DIR/model.safetensors (Hugging Face's Llama tensor names, written by hand: torch 1.13 has
no safetensors package) and DIR/config.json (Hugging Face's field names). The weights are drawn in
float32 from torch.Generator(seed), tensor by tensor in a fixed order, then rounded to --dtype; the
reference computes with those rounded values widened back to float32, as the Java loader does.

reference loads any such directory (also one the Java demo wrote) and, for N requests, runs the prompt
through the model at once (causal attention), then decodes greedily one token at a time with a KV cache.
Request i (the rule the Java demo uses too): a prompt of 4 + 3i tokens, token j being
(1 + 7919 * (131 i + j)) mod vocab, and T + 8 (i mod 2) new tokens. It writes JSON:
  {"config": {...}, "logits_steps": K, "requests": [{"prompt": [...], "max_new_tokens": M,
   "tokens": [...], "logits": [[V floats] x K], "top2_gaps": [...], "min_top2_gap": g}], "min_top2_gap": g}
where logits[s] are the logits that chose tokens[s] (s = 0 is the prompt's last position) and
top2_gaps the margin of the greedy choice at every step. A small margin would make token equality
fragile: with logits within a tolerance tol of torch's, every choice whose margin exceeds 2 tol is
certain to agree. The margins of random models fall roughly exponentially towards 0 with the number of
choices, so the default seed (16) was picked among 1..24 for the test preset's largest smallest margin
over its 272 choices (0.0116; float32 differences between this and the Java decoder are ~2e-5, the
tests' tolerance 1e-3).
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch

PRESETS = {
    # small enough for CI: ~2.8 M parameters in the layers, 2 x 2 M in the embedding and the LM head
    "test": dict(hidden=256, layers=4, heads=8, kv_heads=2, intermediate=688, vocab=8000),
    # the demo's default size
    "demo": dict(hidden=512, layers=8, heads=8, kv_heads=2, intermediate=1408, vocab=32000),
}

DTYPES = {"f32": ("F32", torch.float32), "f16": ("F16", torch.float16), "bf16": ("BF16", torch.bfloat16)}
ELEMENT_BYTES = {"F32": 4, "F16": 2, "BF16": 2}


# ---------------------------------------------------------------------------------------------- files

def write_safetensors(path, tensors):
    """tensors: name -> (safetensors dtype, torch tensor of that dtype). Data in name order."""
    header = {"__metadata__": {"format": "pt"}}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        dtype, t = tensors[name]
        t = t.contiguous()
        if dtype == "BF16":
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().astype("<" + t.numpy().dtype.str[1:]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)


def read_safetensors(path):
    """name -> float32 tensor (F32, F16 and BF16 widened)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[base + b:base + e]
        dtype = info["dtype"]
        if dtype == "F32":
            t = torch.from_numpy(np.frombuffer(raw, dtype="<f4").copy())
        elif dtype == "F16":
            t = torch.from_numpy(np.frombuffer(raw, dtype="<f2").copy()).float()
        elif dtype == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            t = torch.from_numpy(bits.view(np.float32).copy())
        else:
            raise ValueError("unsupported dtype " + dtype + " of " + name)
        out[name] = t.reshape(info["shape"])
    return out


def load_model(directory):
    with open(os.path.join(directory, "config.json")) as f:
        cfg = json.load(f)
    return cfg, read_safetensors(os.path.join(directory, "model.safetensors"))


# ---------------------------------------------------------------------------------------------- weights

def generate(out, preset, seed, dtype, tie, overrides, rope_theta, eps):
    dims = dict(PRESETS[preset])
    dims.update({k: v for k, v in overrides.items() if v is not None})
    h, layers, heads, kvh = dims["hidden"], dims["layers"], dims["heads"], dims["kv_heads"]
    inter, vocab = dims["intermediate"], dims["vocab"]
    hd = h // heads
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, std=1.0, mean=0.0):
        return torch.randn(*shape, generator=g, dtype=torch.float32) * std + mean

    # Scales: unit-variance embeddings, projections at ~1/sqrt(fan_in) (each sub-layer's output is of the
    # order of its input, so every layer changes the residual stream), norm weights around 1, and an LM
    # head that spreads the logits over several units, so that greedy choices are clear-cut.
    w = {"model.embed_tokens.weight": randn(vocab, h)}
    for i in range(layers):
        p = "model.layers.%d." % i
        w[p + "input_layernorm.weight"] = randn(h, std=0.1, mean=1.0)
        w[p + "self_attn.q_proj.weight"] = randn(heads * hd, h, std=1.0 / math.sqrt(h))
        w[p + "self_attn.k_proj.weight"] = randn(kvh * hd, h, std=1.0 / math.sqrt(h))
        w[p + "self_attn.v_proj.weight"] = randn(kvh * hd, h, std=1.0 / math.sqrt(h))
        w[p + "self_attn.o_proj.weight"] = randn(h, heads * hd, std=1.0 / math.sqrt(heads * hd))
        w[p + "post_attention_layernorm.weight"] = randn(h, std=0.1, mean=1.0)
        w[p + "mlp.gate_proj.weight"] = randn(inter, h, std=1.0 / math.sqrt(h))
        w[p + "mlp.up_proj.weight"] = randn(inter, h, std=1.0 / math.sqrt(h))
        w[p + "mlp.down_proj.weight"] = randn(h, inter, std=1.0 / math.sqrt(inter))
    w["model.norm.weight"] = randn(h, std=0.1, mean=1.0)
    if not tie:
        w["lm_head.weight"] = randn(vocab, h, std=4.0 / math.sqrt(h))
    else:
        # tied: the embedding is the LM head too; its unit rows would give logits of ~sqrt(h), so the
        # embedding of a tied model is drawn at the head's scale instead
        w["model.embed_tokens.weight"] = w["model.embed_tokens.weight"] * (4.0 / math.sqrt(h))
    st_dtype, torch_dtype = DTYPES[dtype]
    os.makedirs(out, exist_ok=True)
    write_safetensors(os.path.join(out, "model.safetensors"),
                      {k: (st_dtype, v.to(torch_dtype)) for k, v in w.items()})
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": h,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kvh,
        "vocab_size": vocab,
        "rms_norm_eps": eps,
        "rope_theta": rope_theta,
        "tie_word_embeddings": bool(tie),
        "max_position_embeddings": 4096,
        "hidden_act": "silu",
        "torch_dtype": {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}[dtype],
        "jcomm_seed": seed,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")


# ---------------------------------------------------------------------------------------------- model

class Llama:
    """Hugging Face's LlamaForCausalLM forward, written out (no transformers package here), float32."""

    def __init__(self, cfg, w):
        self.h = cfg["hidden_size"]
        self.layers = cfg["num_hidden_layers"]
        self.heads = cfg["num_attention_heads"]
        self.kvh = cfg.get("num_key_value_heads") or self.heads
        self.hd = cfg.get("head_dim") or self.h // self.heads
        self.eps = float(cfg.get("rms_norm_eps", 1e-6))
        self.theta = float(cfg.get("rope_theta", 10000.0))
        self.vocab = cfg["vocab_size"]
        self.w = w
        self.head = w["lm_head.weight"] if "lm_head.weight" in w and not cfg.get("tie_word_embeddings") \
            else w["model.embed_tokens.weight"]
        self.inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2).float() / self.hd))

    def rms_norm(self, x, weight):
        variance = x.pow(2).mean(-1, keepdim=True)
        return weight * (x * torch.rsqrt(variance + self.eps))

    @staticmethod
    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def rope(self, x, positions):
        # x: [heads, T, hd]
        freqs = torch.outer(positions.float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return x * emb.cos()[None] + self.rotate_half(x) * emb.sin()[None]

    def forward(self, tokens, start, cache):
        """tokens: [T] ids at positions start..start+T-1; cache: per layer [k, v] ([kvh, S, hd]) or None.
        Returns the logits of the last position ([vocab]) and the updated cache."""
        w = self.w
        T = len(tokens)
        positions = torch.arange(start, start + T)
        x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
        new_cache = []
        for i in range(self.layers):
            p = "model.layers.%d." % i
            r = x
            x = self.rms_norm(x, w[p + "input_layernorm.weight"])
            q = (x @ w[p + "self_attn.q_proj.weight"].t()).view(T, self.heads, self.hd).transpose(0, 1)
            k = (x @ w[p + "self_attn.k_proj.weight"].t()).view(T, self.kvh, self.hd).transpose(0, 1)
            v = (x @ w[p + "self_attn.v_proj.weight"].t()).view(T, self.kvh, self.hd).transpose(0, 1)
            q = self.rope(q, positions)
            k = self.rope(k, positions)
            if cache is not None:
                k = torch.cat((cache[i][0], k), dim=1)
                v = torch.cat((cache[i][1], v), dim=1)
            new_cache.append((k, v))
            rep = self.heads // self.kvh
            kk = k.repeat_interleave(rep, dim=0)
            vv = v.repeat_interleave(rep, dim=0)
            scores = (q @ kk.transpose(1, 2)) / math.sqrt(self.hd)  # [heads, T, S]
            S = kk.shape[1]
            # causal: query t (position start + t) sees keys 0..start + t
            mask = torch.arange(S)[None, :] > (positions[:, None])
            scores = scores.masked_fill(mask[None], float("-inf"))
            attn = torch.softmax(scores, dim=-1) @ vv  # [heads, T, hd]
            attn = attn.transpose(0, 1).reshape(T, self.heads * self.hd)
            x = r + attn @ w[p + "self_attn.o_proj.weight"].t()
            r = x
            x = self.rms_norm(x, w[p + "post_attention_layernorm.weight"])
            gate = x @ w[p + "mlp.gate_proj.weight"].t()
            up = x @ w[p + "mlp.up_proj.weight"].t()
            x = r + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].t()
        x = self.rms_norm(x, w["model.norm.weight"])
        return x[-1] @ self.head.t(), new_cache


def requests(n, tokens, vocab):
    """The rule shared with the Java demo (LlamaDemo's default requests)."""
    out = []
    for i in range(n):
        prompt = [(1 + 7919 * (131 * i + j)) % vocab for j in range(4 + 3 * i)]
        out.append((prompt, tokens + 8 * (i % 2)))
    return out


def top2_gap(logits):
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


def reference(model_dir, out, n_prompts, tokens, logits_steps):
    torch.set_num_threads(1)
    cfg, w = load_model(model_dir)
    m = Llama(cfg, w)
    result = {"config": cfg, "logits_steps": logits_steps, "requests": []}
    overall = float("inf")
    with torch.no_grad():
        for prompt, max_new in requests(n_prompts, tokens, m.vocab):
            logits, cache = m.forward(prompt, 0, None)
            pos = len(prompt)
            generated, kept, gaps = [], [], []
            while True:
                tok = int(torch.argmax(logits))
                generated.append(tok)
                gaps.append(top2_gap(logits))
                if len(kept) < logits_steps:
                    kept.append([float(v) for v in logits])
                if len(generated) == max_new:
                    break
                logits, cache = m.forward([tok], pos, cache)
                pos += 1
            gap = min(gaps)
            overall = min(overall, gap)
            result["requests"].append({"prompt": prompt, "max_new_tokens": max_new, "tokens": generated,
                                       "logits": kept, "top2_gaps": gaps, "min_top2_gap": gap})
            print("request %d: prompt %d tokens, %d new, smallest top-2 margin %.4f, first tokens %s"
                  % (len(result["requests"]) - 1, len(prompt), len(generated), gap, generated[:8]))
    result["min_top2_gap"] = overall
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, separators=(",", ":"))
    os.replace(tmp, out)
    print("reference written to %s (smallest top-2 margin %.4f)" % (out, overall))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--out", required=True)
    g.add_argument("--preset", choices=sorted(PRESETS), default="test")
    g.add_argument("--seed", type=int, default=16)
    g.add_argument("--dtype", choices=sorted(DTYPES), default="f32")
    g.add_argument("--tie", action="store_true")
    for name in ("hidden", "layers", "heads", "kv-heads", "intermediate", "vocab"):
        g.add_argument("--" + name, type=int)
    g.add_argument("--rope-theta", type=float, default=10000.0)
    g.add_argument("--eps", type=float, default=1e-5)
    g.add_argument("--reference", help="also write the reference of the new model to this file")
    r = sub.add_parser("reference")
    r.add_argument("--model", required=True)
    r.add_argument("--out", required=True)
    for p in (g, r):
        p.add_argument("--prompts", type=int, default=4)
        p.add_argument("--tokens", type=int, default=64)
        p.add_argument("--logits-steps", type=int, default=4)
    a = ap.parse_args(argv)
    if a.cmd == "generate":
        overrides = {"hidden": a.hidden, "layers": a.layers, "heads": a.heads, "kv_heads": a.kv_heads,
                     "intermediate": a.intermediate, "vocab": a.vocab}
        generate(a.out, a.preset, a.seed, a.dtype, a.tie, overrides, a.rope_theta, a.eps)
        print("model written to %s" % a.out)
        if a.reference:
            reference(a.out, a.reference, a.prompts, a.tokens, a.logits_steps)
    else:
        reference(a.model, a.out, a.prompts, a.tokens, a.logits_steps)


if __name__ == "__main__":
    main(sys.argv[1:])
