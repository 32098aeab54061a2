"""The decode-step cost model (docs/cost-model.md) against a real GPU's kernels.

    python scripts/bench_gpu_step.py measure -o steps.json      # on a CUDA machine: torch alone, about 2 minutes
    python scripts/bench_gpu_step.py analyse steps.json         # anywhere: the fit and the tables

`measure` builds a decoder of Qwen2.5-7B's shape (28 layers, hidden 3,584, 28 query heads and 4 KV heads of 128, MLP
18,944, vocabulary 152,064; `--shape llama2-7b`: Llama-2-7B's, with multi-head attention) with random bf16 weights,
in plain PyTorch: cuBLAS for the weight GEMMs (as vLLM uses for bf16), a dense KV cache per sequence, and per
configuration the fastest of its attention kernels (scaled_dot_product_attention with the 7 query heads of a KV
head as its query rows; two batched matmuls around a softmax; the same cut into chunks of the KV length merged by
their log-sum-exp, split-KV as serving engines decode long contexts, in plain PyTorch, `split_kv_attention`, and,
where Triton is installed, as one fused kernel, `triton_split_kv_attention`; files measured before 2026-12-04's
evening have the first two). A whole decode step (every layer, the LM head, a greedy
pick, the next token's embedding) is captured as one CUDA graph, as vLLM captures its decode steps, and timed by
CUDA events over repeated replays (median). For every batch size b and context per sequence it records three times:
the whole step, the step without attention (the weight GEMMs alone) and the attention alone, so that the model's
additive form (GEMMs + KV reads) is checked as well as its total. It also times a prefill of whole prompts (causal
attention) and two ceilings: a device-to-device copy and a large bf16 matrix product.

It is not vLLM (no paged cache, scheduler or sampler; its attention kernels are not vLLM's), so it checks the
shape of the step model and the efficiencies its GEMMs and KV reads reach on the chip, not an engine's wall
time: `asp replay` and `asp calibrate` do that (docs/replay.md).

`analyse` fits the step model t = t_o + max(W / BW', 2·N·b / F') + kv·ctx / BW' to the whole steps by least
squares on relative error (a small grid over the efficiencies, then the overhead in closed form), once with
one bandwidth efficiency for weights and KV (the model's form) and once with the KV term's own, and prints
every point measured against the fit and against `asp`'s H100 preset carried over to the chip's data-sheet
figures (`--bandwidth`, `--flops`; default the H200 SXM's 4.8 TB/s and 989 dense bf16 TFLOP/s).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import platform
import sys
import time
from pathlib import Path

# Qwen2.5-7B (its config.json): the shape of the default preset `h100-qwen2.5-7b`.
QWEN25_7B = {"layers": 28, "hidden": 3584, "heads": 28, "kv_heads": 4, "head_dim": 128, "intermediate": 18944,
             "vocab": 152064}
# Llama-2-7B (its config.json): multi-head attention, 8 times Qwen2.5-7B's KV bytes per token (`a100-llama2-7b`).
LLAMA2_7B = {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32, "head_dim": 128, "intermediate": 11008,
             "vocab": 32000}
TINY = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "head_dim": 16, "intermediate": 128, "vocab": 256}
# (batch size, context tokens per sequence): at most 2^20 tokens of KV in all (57 GiB for Qwen2.5-7B).
BATCHES = (1, 4, 16, 64, 128, 256, 512, 1024)


def grid_of(contexts, kv_tokens: int) -> list[tuple[int, int]]:
    """Every (batch size, context per sequence) of `BATCHES` x ``contexts`` holding at most ``kv_tokens`` of KV."""
    return [(b, c) for c in contexts for b in BATCHES if b * c <= kv_tokens]


GRID = grid_of((256, 1024, 4096), 2**20)
# Llama-2-7B's KV is 512 KiB a token: at most 2^17 tokens in all (69 GB).
LLAMA_GRID = grid_of((256, 1024, 4096), 2**17)
TINY_GRID = [(1, 16), (4, 16), (8, 32)]
SHAPES = {"qwen2.5-7b": (QWEN25_7B, 2**20), "llama2-7b": (LLAMA2_7B, 2**17)}  # the shape, its KV tokens at most
PREFILLS = [(16, 512), (4, 2048)]  # (prompts, tokens each)
TINY_PREFILLS = [(2, 16)]


def shape_counts(shape: dict) -> dict:
    """Parameters (all, and read by one decode step: every layer, the LM head and b rows of the embedding) and KV
    bytes per token of a decoder of this shape in bf16."""
    h, q, kv, d, f, v = (shape[k] for k in ("hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab"))
    per_layer = h * (q + 2 * kv) * d + (q + 2 * kv) * d + q * d * h + 3 * h * f + 2 * h
    decoded = shape["layers"] * per_layer + v * h + h  # the LM head and the final norm
    return {"params": decoded + v * h, "decode_params": decoded,
            "kv_bytes_per_token": 2 * shape["layers"] * kv * d * 2}


# ---------------------------------------------------------------------------------------------------- measure


def kv_splits(batch: int, kv_heads: int, context: int, target_blocks: int = 1024, min_chunk: int = 256) -> int:
    """How many chunks to cut each sequence's KV into for `split_kv_attention`: a power of two dividing the
    context, enough that batch x kv_heads x chunks reaches about ``target_blocks`` parallel pieces of work,
    each chunk at least ``min_chunk`` tokens (1 where the context is too short to split)."""
    splits = 1
    while (batch * kv_heads * splits < target_blocks and context % (2 * splits) == 0
           and context // (2 * splits) >= min_chunk):
        splits *= 2
    return splits


def split_kv_attention(q, k, v, splits: int):
    """Decode attention with the KV length cut into ``splits`` chunks, each attended to on its own and the
    partial results merged by their log-sum-exp: the idea of split-KV ("flash-decoding", Dao, Haziza, Massa and
    Sizov, 2023), written here in plain PyTorch. One long sequence then runs on many blocks instead of a few.
    q [b, kv, group, d]; k, v [b, kv, ctx, d] with ctx divisible by ``splits``; returns [b, kv, group, d]."""
    import torch

    b, kvh, group, d = q.shape
    ctx = k.shape[2]
    ks = k.view(b, kvh, splits, ctx // splits, d)
    vs = v.view(b, kvh, splits, ctx // splits, d)
    scores = torch.matmul(q.unsqueeze(2), ks.transpose(-1, -2)).float() * (d ** -0.5)  # [b, kv, s, group, chunk]
    peak = scores.amax(dim=-1, keepdim=True)
    weights = torch.exp(scores - peak)
    partial = torch.matmul(weights.to(q.dtype), vs).float()  # [b, kv, s, group, d], unnormalised
    total = weights.sum(dim=-1, keepdim=True)  # [b, kv, s, group, 1]
    top = peak.amax(dim=2, keepdim=True)
    scale = torch.exp(peak - top)
    return ((partial * scale).sum(dim=2) / (total * scale).sum(dim=2)).to(q.dtype)


_TRITON_KERNEL: list = []  # the compiled-on-first-use Triton kernel of `triton_split_kv_attention`


def _triton_partial_kernel():
    """The split-KV decode kernel in Triton (built once): one program per (sequence, KV head, chunk) runs an
    online softmax over its chunk of the cache for the KV head's query rows (grouped-query attention: the rows
    padded to 16 for the tensor cores) and writes its unnormalised output, running maximum and sum."""
    if _TRITON_KERNEL:
        return _TRITON_KERNEL[0]
    import triton
    import triton.language as tl

    @triton.jit
    def partial(q_ptr, k_ptr, v_ptr, o_ptr, m_ptr, l_ptr, scale, heads, splits, CHUNK: tl.constexpr,
                GROUP: tl.constexpr, ROWS: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr):
        b = tl.program_id(0)
        h = tl.program_id(1)
        s = tl.program_id(2)
        rows = tl.arange(0, ROWS)
        dims = tl.arange(0, D)
        cols = tl.arange(0, BLOCK)
        ctx = CHUNK * splits
        q = tl.load(q_ptr + ((b * heads + h) * GROUP + rows[:, None]) * D + dims[None, :],
                    mask=rows[:, None] < GROUP, other=0.0)
        kv_base = (b * heads + h) * ctx * D
        peak = tl.full([ROWS], float("-inf"), tl.float32)
        total = tl.zeros([ROWS], tl.float32)
        acc = tl.zeros([ROWS, D], tl.float32)
        for step in range(0, CHUNK, BLOCK):
            offsets = kv_base + (s * CHUNK + step + cols[:, None]) * D + dims[None, :]
            k = tl.load(k_ptr + offsets)
            v = tl.load(v_ptr + offsets)
            scores = tl.dot(q, tl.trans(k)) * scale
            new_peak = tl.maximum(peak, tl.max(scores, 1))
            alpha = tl.exp(peak - new_peak)
            weights = tl.exp(scores - new_peak[:, None])
            total = total * alpha + tl.sum(weights, 1)
            acc = acc * alpha[:, None] + tl.dot(weights.to(v.dtype), v)
            peak = new_peak
        out = ((b * heads + h) * splits + s) * GROUP + rows
        tl.store(o_ptr + out[:, None] * D + dims[None, :], acc, mask=rows[:, None] < GROUP)
        tl.store(m_ptr + out, peak, mask=rows < GROUP)
        tl.store(l_ptr + out, total, mask=rows < GROUP)

    _TRITON_KERNEL.append(partial)
    return partial


def triton_split_kv_attention(q, k, v, splits: int, block: int = 64):
    """`split_kv_attention` as one fused Triton kernel per chunk (the way serving engines decode long contexts:
    vLLM and LightLLM ship Triton decode kernels of this kind), the chunks merged by log-sum-exp in PyTorch.
    q [b, kv, group, d]; k, v [b, kv, ctx, d] contiguous, ctx // splits a multiple of ``block``."""
    import torch

    b, kvh, group, d = q.shape
    chunk = k.shape[2] // splits
    parts = torch.empty(b, kvh, splits, group, d, dtype=torch.float32, device=q.device)
    peak = torch.empty(b, kvh, splits, group, dtype=torch.float32, device=q.device)
    total = torch.empty_like(peak)
    _triton_partial_kernel()[(b, kvh, splits)](q.contiguous(), k, v, parts, peak, total, d ** -0.5, kvh, splits,
                                              CHUNK=chunk, GROUP=group, ROWS=max(16, 1 << (group - 1).bit_length()),
                                              D=d, BLOCK=min(block, chunk))
    top = peak.amax(dim=2, keepdim=True)
    scale = torch.exp(peak - top)
    return ((parts * scale[..., None]).sum(dim=2) / (total * scale).sum(dim=2)[..., None]).to(q.dtype)


def measure(shape: dict, grid: list, prefills: list, device: str, repeats: int, compiled: bool = False) -> dict:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    dt = torch.bfloat16
    L, h, nq, nkv, d, f, v = (shape[k] for k in ("layers", "hidden", "heads", "kv_heads", "head_dim",
                                                   "intermediate", "vocab"))
    group = nq // nkv
    cuda = device.startswith("cuda")

    def param(*size):
        return torch.empty(*size, dtype=dt, device=device).normal_(0.0, 0.02)

    layers = [{"qkv": param((nq + 2 * nkv) * d, h), "qkv_b": param((nq + 2 * nkv) * d), "o": param(h, nq * d),
               "gate_up": param(2 * f, h), "down": param(h, f), "n1": param(h) + 1, "n2": param(h) + 1}
              for _ in range(L)]
    embed, lm_head, final_norm = param(v, h), param(v, h), param(h) + 1
    max_tokens = max(b * c for b, c in grid)
    # One flat K and V buffer per layer; each configuration views its first b*ctx tokens as [b, kv, ctx, d].
    kbuf = [torch.empty(max_tokens * nkv * d, dtype=dt, device=device).normal_() for _ in range(L)]
    vbuf = [torch.empty(max_tokens * nkv * d, dtype=dt, device=device).normal_() for _ in range(L)]

    def rms(x, w):
        return F.rms_norm(x, (h,), w, 1e-6)

    def rope(x, cos, sin):  # rotate-half RoPE at one position per row
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    def attention(kind, q, k, vv):
        """q [b, kv, group, d] against k, v [b, kv, ctx, d]: every cached token is visible to a decoded one."""
        if kind == "sdpa":
            return F.scaled_dot_product_attention(q, k, vv)
        if kind == "split":
            return split_kv_attention(q, k, vv, kv_splits(q.shape[0], nkv, k.shape[2]))
        if kind == "triton":
            return triton_split_kv_attention(q, k, vv, kv_splits(q.shape[0], nkv, k.shape[2]))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (d ** -0.5)
        return torch.matmul(torch.softmax(scores.float(), dim=-1).to(dt), vv)

    def decode_step(tokens, b, ctx, kind, with_attention=True, with_gemms=True):
        caches = [(kb[: b * nkv * ctx * d].view(b, nkv, ctx, d), vb[: b * nkv * ctx * d].view(b, nkv, ctx, d))
                  for kb, vb in zip(kbuf, vbuf)]
        angle = torch.full((1, 1, d // 2), float(ctx - 1), device=device, dtype=torch.float32)
        cos, sin = angle.cos().to(dt), angle.sin().to(dt)
        x = embed[tokens]
        for layer, (kc, vc) in zip(layers, caches):
            if with_gemms:
                qkv = torch.addmm(layer["qkv_b"], rms(x, layer["n1"]), layer["qkv"].t())
            else:  # attention alone: the projections' outputs stood in by a slice of the input
                qkv = x.new_zeros(b, (nq + 2 * nkv) * d) + x[:, :1]
            q, k, vv = qkv.split([nq * d, nkv * d, nkv * d], dim=-1)
            q = rope(q.view(b, nq, d), cos, sin)
            if with_attention:
                kc[:, :, ctx - 1] = rope(k.view(b, nkv, d), cos, sin)
                vc[:, :, ctx - 1] = vv.view(b, nkv, d)
                out = attention(kind, q.view(b, nkv, group, d), kc, vc).reshape(b, nq * d)
            else:
                out = q.reshape(b, nq * d)
            if with_gemms:
                x = x + out @ layer["o"].t()
                gate, up = (rms(x, layer["n2"]) @ layer["gate_up"].t()).chunk(2, dim=-1)
                x = x + (F.silu(gate) * up) @ layer["down"].t()
            else:
                x = x + out[:, :h]
        if with_gemms:
            return (rms(x, final_norm) @ lm_head.t()).argmax(dim=-1)
        return x[:, 0].long().clamp(0, v - 1)

    spread: list[float] = []  # each timing's slowest replay over its fastest, minus one

    def timed(fn, reps):
        """Median seconds of one call of fn, as a CUDA graph where the device is CUDA."""
        if cuda:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):
                    fn()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                fn()
            for _ in range(3):
                graph.replay()
            torch.cuda.synchronize()
            times = []
            for _ in range(reps):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                graph.replay()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
            del graph
        else:
            fn()
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        times.sort()
        spread.append(times[-1] / times[0] - 1.0 if times[0] > 0 else 0.0)
        return times[len(times) // 2]

    out = {"shape": shape, **shape_counts(shape), "device": device, "torch": torch.__version__,
           "python": platform.python_version(), "repeats": repeats, "steps": [], "prefills": [], "ceilings": {}}
    if cuda:
        props = torch.cuda.get_device_properties(0)
        out["gpu"] = props.name
        out["gpu_memory_bytes"] = props.total_memory
        # Ceilings, after a few seconds of matrix products to bring the clocks up: an 8192^3 bf16 product, and a
        # 4 GiB copy (bytes read plus written) both as a kernel on the multiprocessors and as a graph's memcpy
        # node (which the driver may give to a copy engine).
        a, bm = param(8192, 8192), param(8192, 8192)
        for _ in range(2000):
            a @ bm
        mm_s = timed(lambda: a @ bm, 10)
        out["ceilings"]["matmul_flops_per_s"] = 2 * 8192**3 / mm_s
        del a, bm
        src = torch.empty(2**31, dtype=dt, device=device).normal_()
        dst = torch.empty_like(src)
        out["ceilings"]["copy_kernel_bytes_per_s"] = 2 * src.numel() * 2 / timed(lambda: torch.mul(src, 1, out=dst), 10)
        out["ceilings"]["copy_memcpy_bytes_per_s"] = 2 * src.numel() * 2 / timed(lambda: dst.copy_(src), 10)
        del src, dst
    kinds = ["sdpa", "matmul", "split"]
    if cuda and importlib.util.find_spec("triton") is not None:
        kinds.append("triton")
    with torch.inference_mode():
        for b, ctx in grid:
            tokens = torch.zeros(b, dtype=torch.long, device=device)
            if compiled:
                # The whole step through torch.compile (Inductor fuses the norms, rotary embedding, activations
                # and cache writes into a few Triton kernels, as vLLM compiles its models), beside the same step
                # eager: what the small kernels' launches cost of the per-step overhead. Each shape compiles anew.
                import torch._dynamo

                torch._dynamo.reset()
                fused = torch.compile(lambda tokens=tokens, b=b, ctx=ctx: decode_step(tokens, b, ctx, "sdpa"))
                row = {"batch": b, "context_per_seq": ctx, "context_tokens": b * ctx, "attention_kernel": "sdpa",
                       "compiled": True, "step_s": timed(fused, repeats),
                       "eager_step_s": timed(lambda: decode_step(tokens, b, ctx, "sdpa"), repeats)}
                out["steps"].append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
                continue
            attention_s = {}
            for kind in kinds:
                try:
                    attention_s[kind] = timed(lambda: decode_step(tokens, b, ctx, kind, with_gemms=False), repeats)
                except Exception as exc:  # a kernel that refuses the shape (Triton's compile errors are its own)
                    print(f"  {kind} attention refused b={b} ctx={ctx}: {str(exc)[:120]}", file=sys.stderr)
            kind = min(attention_s, key=attention_s.get)
            row = {"batch": b, "context_per_seq": ctx, "context_tokens": b * ctx, "attention_kernel": kind,
                   "step_s": timed(lambda: decode_step(tokens, b, ctx, kind), repeats),
                   "gemms_only_s": timed(lambda: decode_step(tokens, b, ctx, kind, with_attention=False), repeats),
                   "attention_only_s": attention_s[kind],
                   **{f"attention_{k}_s": t for k, t in attention_s.items()}}
            row["step_replay_spread"] = spread[-2]  # the whole step's, timed second from last
            out["steps"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        for prompts, length in prefills:
            x0 = embed[torch.zeros(prompts, length, dtype=torch.long, device=device)]

            def prefill(x0=x0, prompts=prompts, length=length):
                x = x0
                for layer in layers:
                    qkv = torch.addmm(layer["qkv_b"], rms(x, layer["n1"]).view(-1, h), layer["qkv"].t())
                    q, k, vv = qkv.view(prompts, length, -1).split([nq * d, nkv * d, nkv * d], dim=-1)
                    q = q.view(prompts, length, nq, d).transpose(1, 2)
                    k = k.view(prompts, length, nkv, d).transpose(1, 2).repeat_interleave(group, dim=1)
                    vv = vv.view(prompts, length, nkv, d).transpose(1, 2).repeat_interleave(group, dim=1)
                    att = F.scaled_dot_product_attention(q, k, vv, is_causal=True)
                    x = x + att.transpose(1, 2).reshape(prompts, length, nq * d) @ layer["o"].t()
                    gate, up = (rms(x, layer["n2"]) @ layer["gate_up"].t()).chunk(2, dim=-1)
                    x = x + (F.silu(gate) * up) @ layer["down"].t()
                return (rms(x[:, -1], final_norm) @ lm_head.t()).argmax(dim=-1)

            row = {"prompts": prompts, "tokens_each": length, "tokens": prompts * length,
                   "prefill_s": timed(prefill, max(3, repeats // 4))}
            out["prefills"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return out


# ---------------------------------------------------------------------------------------------------- analyse


def step_model(batch, context, *, weights_s, compute_s_per_seq, kv_s_per_token, overhead_s):
    """docs/cost-model.md's decode step: t_o + max(W / BW', 2·N·b / F') + kv·ctx / BW' (numpy arrays)."""
    import numpy as np

    return overhead_s + np.maximum(weights_s, compute_s_per_seq * batch) + kv_s_per_token * context


def model_times(rows: list, counts: dict, bandwidth: float, flops: float, eta_bw: float, eta_f: float,
                eta_kv: float, overhead_s: float):
    """Every row's step time by the model at these efficiencies, in the presets' accounting (the whole model's
    bytes read and 2·N FLOPs per token)."""
    import numpy as np

    return step_model(np.array([r["batch"] for r in rows], dtype=float),
                      np.array([r["context_tokens"] for r in rows], dtype=float),
                      weights_s=2.0 * counts["params"] / (eta_bw * bandwidth),
                      compute_s_per_seq=2.0 * counts["params"] / (eta_f * flops),
                      kv_s_per_token=counts["kv_bytes_per_token"] / (eta_kv * bandwidth), overhead_s=overhead_s)


def fit(rows: list, counts: dict, bandwidth: float, flops: float, *, shared_eta: bool) -> dict:
    """Least squares on relative error over the whole steps: the efficiencies on a grid (the bandwidth one shared
    by weights and KV, or the KV term's own), the overhead t_o >= 0 in closed form for each."""
    import numpy as np

    b = np.array([r["batch"] for r in rows], dtype=float)
    ctx = np.array([r["context_tokens"] for r in rows], dtype=float)
    t = np.array([r["step_s"] for r in rows], dtype=float)
    # The presets' accounting: the whole model's bytes read and 2·N FLOPs per token (the embedding, about 7% of
    # Qwen2.5-7B, is not read by a decode step; its share is absorbed into the efficiencies, as it is in a preset).
    weight_bytes = 2.0 * counts["params"]
    etas = np.linspace(0.2, 1.0, 161)
    best = None
    for eta_w in etas:
        for eta_f in etas:
            gemms = step_model(b, 0.0 * ctx, weights_s=weight_bytes / (eta_w * bandwidth),
                               compute_s_per_seq=2.0 * counts["params"] / (eta_f * flops),
                               kv_s_per_token=0.0, overhead_s=0.0)
            eta_kv = np.array([eta_w]) if shared_eta else etas
            base = gemms[None, :] + (counts["kv_bytes_per_token"] / (eta_kv[:, None] * bandwidth)) * ctx[None, :]
            # for each eta_kv, the o >= 0 that minimises sum((base + o - t)^2 / t^2)
            o = np.maximum(0.0, np.sum((t - base) / t**2, axis=1) / np.sum(1.0 / t**2))
            err = np.sqrt(np.mean(((base + o[:, None]) / t - 1.0) ** 2, axis=1))
            i = int(np.argmin(err))
            if best is None or err[i] < best["rms_relative_error"]:
                best = {"eta_bandwidth": float(eta_w), "eta_flops": float(eta_f), "eta_kv": float(eta_kv[i]),
                        "overhead_s": float(o[i]), "rms_relative_error": float(err[i])}
    return best


def analyse(data: dict, bandwidth: float, flops: float, eta_bw: float, eta_f: float, overhead_s: float) -> str:
    import numpy as np

    rows = data["steps"]
    counts = {k: data[k] for k in ("params", "decode_params", "kv_bytes_per_token")}
    lines = [f"GPU {data.get('gpu', data['device'])}, torch {data['torch']}; decoder of {counts['params'] / 1e9:.2f}B "
             f"parameters ({counts['decode_params'] / 1e9:.2f}B read per decode step), "
             f"{counts['kv_bytes_per_token']:,} B of KV per token."]
    ceilings = data.get("ceilings", {})
    if ceilings:
        copies = ", ".join(f"{label} {ceilings[key] / 1e12:.2f} TB/s ({ceilings[key] / bandwidth:.0%})"
                           for key, label in (("copy_kernel_bytes_per_s", "as a kernel"),
                                              ("copy_memcpy_bytes_per_s", "as a graph memcpy"),
                                              ("copy_bytes_per_s", "as a graph memcpy")) if key in ceilings)
        lines.append(f"Ceilings measured: a 4 GiB copy (read + written) {copies} of the {bandwidth / 1e12:.2f} TB/s "
                     f"data sheet; bf16 matmul {ceilings['matmul_flops_per_s'] / 1e12:.0f} TFLOP/s "
                     f"({ceilings['matmul_flops_per_s'] / flops:.0%} of {flops / 1e12:.0f}).")
    one = fit(rows, counts, bandwidth, flops, shared_eta=True)
    two = fit(rows, counts, bandwidth, flops, shared_eta=False)
    preset = model_times(rows, counts, bandwidth, flops, eta_bw, eta_f, eta_bw, overhead_s)
    fitted = model_times(rows, counts, bandwidth, flops, one["eta_bandwidth"], one["eta_flops"], one["eta_kv"],
                         one["overhead_s"])
    measured = np.array([r["step_s"] for r in rows])
    for name, f in (("the model's form (one bandwidth efficiency)", one), ("the KV term's own efficiency", two)):
        lines.append(f"Fit, {name}: eta_bandwidth {f['eta_bandwidth']:.3f}, KV {f['eta_kv']:.3f}, eta_flops "
                     f"{f['eta_flops']:.3f}, t_o {f['overhead_s'] * 1e3:.2f} ms; RMS relative error "
                     f"{f['rms_relative_error']:.1%}.")
    preset_err = preset / measured - 1.0
    lines.append(f"The H100 preset's assumed figures at this chip's data sheet (eta_bandwidth {eta_bw}, eta_flops "
                 f"{eta_f}, t_o {overhead_s * 1e3:.1f} ms, whole model read): RMS relative error "
                 f"{float(np.sqrt(np.mean(preset_err ** 2))):.1%}, from {preset_err.min():+.0%} to "
                 f"{preset_err.max():+.0%}.")
    lines.append("")
    lines.append("| batch | context/seq | attention | measured ms | GEMMs alone + attention alone ms | fit ms | "
                 "fit error | preset ms | preset error | tokens/s |")
    lines.append("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r, fm, pm in zip(rows, fitted, preset):
        parts = (f"{(r['gemms_only_s'] + r['attention_only_s']) * 1e3:.2f}" if r.get("gemms_only_s") is not None
                 else f"(eager {r['eager_step_s'] * 1e3:.2f})" if r.get("eager_step_s") is not None else "-")
        kernel = r["attention_kernel"] + (", compiled" if r.get("compiled") else "")
        lines.append(f"| {r['batch']} | {r['context_per_seq']:,} | {kernel} | {r['step_s'] * 1e3:.2f} | "
                     f"{parts} | {fm * 1e3:.2f} | "
                     f"{fm / r['step_s'] - 1:+.1%} | {pm * 1e3:.2f} | {pm / r['step_s'] - 1:+.1%} | "
                     f"{r['batch'] / r['step_s']:,.0f} |")
    split = [r for r in rows if r.get("gemms_only_s") is not None]
    additive = np.array([(r["gemms_only_s"] + r["attention_only_s"]) / r["step_s"] - 1 for r in split])
    lines.append("")
    if additive.size:
        lines.append(f"GEMMs alone + attention alone over the whole step: {additive.mean():+.1%} on average "
                     f"({additive.min():+.1%} to {additive.max():+.1%}).")
    both = [r for r in rows if r.get("eager_step_s") is not None]
    if both:
        saved = np.array([r["eager_step_s"] - r["step_s"] for r in both])
        lines.append("torch.compile against the same step eager, eager minus compiled: "
                     + ", ".join(f"{r['batch']} x {r['context_per_seq']:,} {d * 1e3:+.2f} ms" for r, d in zip(both, saved))
                     + ".")
    for p in data.get("prefills", []):
        eff = 2.0 * counts["params"] * p["tokens"] / p["prefill_s"] / flops
        lines.append(f"Prefill of {p['prompts']} x {p['tokens_each']:,} tokens: {p['prefill_s'] * 1e3:.1f} ms, "
                     f"{eff:.0%} of the data sheet's FLOP/s (2·N per token; causal attention on top); the preset "
                     f"charges {2.0 * counts['params'] * p['tokens'] / (eta_f * flops) * 1e3:.1f} ms.")
    return "\n".join(lines)


def against(data: dict, preset) -> str:
    """A preset's own step times (`HardwarePreset.step_seconds`) against every measured step: out of sample where
    the measurements are not the ones it was fitted to."""
    import numpy as np

    rows = data["steps"]
    predicted = preset.step_seconds(np.array([r["batch"] for r in rows]), np.array([r["context_tokens"] for r in rows]))
    error = predicted / np.array([r["step_s"] for r in rows]) - 1.0
    worst = int(np.argmax(np.abs(error)))
    return (f"Preset {preset.name} against these {len(rows)} steps: RMS relative error "
            f"{float(np.sqrt(np.mean(error ** 2))):.1%}, from {error.min():+.1%} to {error.max():+.1%} (worst: "
            f"{rows[worst]['batch']} sequences of {rows[worst]['context_per_seq']:,} tokens).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="time decode steps on this machine's GPU (torch)")
    m.add_argument("-o", "--output", type=Path, required=True)
    m.add_argument("--device", default="cuda")
    m.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-7b", help="the decoder's shape")
    m.add_argument("--contexts", default="256,1024,4096",
                   help="tokens of context per sequence, comma-separated (every batch size that fits is timed)")
    m.add_argument("--prefills", default=",".join(f"{n}x{t}" for n, t in PREFILLS),
                   help="prefills to time, PROMPTSxTOKENS comma-separated (long ones price a preemption's recompute)")
    m.add_argument("--tiny", action="store_true", help="a tiny decoder and grid (a smoke test, any device)")
    m.add_argument("--compiled", action="store_true",
                   help="time each step through torch.compile beside the same step eager (SDPA attention)")
    m.add_argument("--batches", help="batch sizes to time, comma-separated (default: every one that fits)")
    m.add_argument("--repeats", type=int, default=15)
    a = sub.add_parser("analyse", help="fit the step model to a measure file and print the tables")
    a.add_argument("file", type=Path, nargs="+",
                   help="measure files of one GPU and shape (several are fitted as one: e.g. short and long contexts)")
    a.add_argument("--bandwidth", type=float, default=4.8e12, help="data-sheet HBM bytes/s (H200 SXM: 4.8e12)")
    a.add_argument("--flops", type=float, default=989e12, help="data-sheet dense bf16 FLOP/s (H200 SXM: 989e12)")
    a.add_argument("--against", help="also judge a preset's own step times against the measured ones (a name)")
    args = parser.parse_args(argv)
    if args.command == "measure":
        try:
            contexts = [int(c) for c in args.contexts.split(",")]
            if min(contexts) < 1:
                raise ValueError
        except ValueError:
            parser.error(f"--contexts takes whole numbers of tokens above 0, comma-separated (got {args.contexts!r})")
        try:
            prefills = [tuple(int(x) for x in item.split("x")) for item in args.prefills.split(",")]
            if any(len(item) != 2 or min(item) < 1 for item in prefills):
                raise ValueError
        except ValueError:
            parser.error(f"--prefills takes PROMPTSxTOKENS with whole numbers above 0, comma-separated (got "
                         f"{args.prefills!r}; e.g. 16x512,1x16384)")
        try:
            import torch  # noqa: F401
        except ImportError:
            parser.error("measure needs PyTorch (pip install torch; a CUDA build on the GPU machine)")
        shape, kv_tokens = SHAPES[args.shape]
        shape, grid = (TINY, TINY_GRID) if args.tiny else (shape, grid_of(contexts, kv_tokens))
        if args.batches:
            try:
                wanted = {int(b) for b in args.batches.split(",")}
            except ValueError:
                parser.error(f"--batches takes whole numbers, comma-separated (got {args.batches!r})")
            grid = [(b, c) for b, c in grid if b in wanted]
        data = measure(shape, grid, TINY_PREFILLS if args.tiny else prefills, args.device, args.repeats,
                       compiled=args.compiled)
        data["shape_name"] = "tiny" if args.tiny else args.shape
        tmp = args.output.with_name(args.output.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        tmp.replace(args.output)
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from asp_cli.costmodel import PRESETS

    h100 = PRESETS["h100-qwen2.5-7b"]
    data = None
    for path in args.file:
        try:
            part = json.loads(path.read_text())
            part["steps"][0]["step_s"], part["params"]  # noqa: B018 (a measure file's shape)
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            parser.error(f"{path}: not a file `measure -o` wrote ({type(exc).__name__}: {exc})")
        if data is None:
            data = part
            continue
        for key in ("params", "kv_bytes_per_token", "gpu"):
            if part.get(key) != data.get(key):
                parser.error(f"{path}: {key} {part.get(key)!r}, where {args.file[0]} has {data.get(key)!r} "
                             "(fit one GPU and one shape at a time)")
        data["steps"] = data["steps"] + part["steps"]
        data["prefills"] = data.get("prefills", []) + part.get("prefills", [])
    print(analyse(data, args.bandwidth, args.flops, h100.eta_bandwidth, h100.eta_flops, h100.step_overhead_s))
    if args.against:
        if args.against not in PRESETS:
            parser.error(f"--against takes a preset name: {', '.join(PRESETS)}")
        print(against(data, PRESETS[args.against]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
