#!/usr/bin/env python3
"""The PyTorch peer of the GPU training benchmark (bench/gpu-model.bench.ts, issue 13): Hugging Face
Qwen3ForCausalLM built from a config (Qwen3-0.6B or Qwen3-1.7B shapes) with random weights, bf16,
sdpa attention, fused AdamW, trained on packed micro-batches of about 16k tokens from sequences of
512-4096 tokens. Prints one JSON line: training tokens/s, step times, peak device memory, the model
FLOPs, and the torch / transformers versions.

Usage: python3 bench/torch_gpu_model.py ['<json spec>']   (the caller builds the spec; all keys optional)
  model          "0.6B" | "1.7B" (default) | "tiny" (a few-MB model, to check this script on a CPU)
  tokens         micro-batch token budget (16384)
  min_len, max_len  sequence lengths, uniform (512, 4096)
  steps, warmup  timed and untimed optimizer steps, one micro-batch each (3, 1)
  precision      "amp" (default: fp32 parameters and AdamW state, bf16 autocast: the state the
                 murphy engine keeps) or "bf16" (parameters and AdamW state in bf16)
  checkpointing  true | false | null (default null: on for models of 1e9 parameters and more,
                 murphy's default rule)
  device         "cuda" (default) or "cpu"; seed (0); lr (1e-5)

Packing for sdpa: sdpa attends within one row and takes no per-sequence offsets (flash-attention's
varlen path is not sdpa's), and a block-diagonal mask over 16k tokens would force its slower masked
kernels. So a micro-batch is a list of whole sequences filled up to the token budget; each sequence
runs as its own [1, L] row (causal, no mask, no padding: sdpa's flash kernel), its mean-token loss
weighted by L / (micro-batch tokens), gradients accumulated, then one fused AdamW step. Every
token counted is a real token. Position ids restart at 0 for each sequence.
"""
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_peer import time_ms  # noqa: E402

SHAPES = {
    # from the Qwen3 model cards' config.json (vocab 151936, tied embeddings, rope theta 1e6)
    "0.6B": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128),
    "1.7B": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, vocab_size=512),
}


def fail(msg):
    print(f"torch_gpu_model: {msg}", file=sys.stderr)
    sys.exit(1)


def pack(rng, budget, min_len, max_len, count):
    """`count` micro-batches, each a list of sequence lengths filled up to `budget` tokens."""
    out = []
    for _ in range(count):
        lens = []
        while True:
            L = rng.randint(min_len, max_len)
            if sum(lens) + L > budget:
                if lens:
                    break
                L = budget  # a budget below min_len: one sequence of the budget
            lens.append(L)
            if sum(lens) >= budget:
                break
        out.append(lens)
    return out


def main():
    spec = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    name = spec.get("model", "1.7B")
    if name not in SHAPES:
        fail(f"model '{name}' unknown: use one of {', '.join(SHAPES)}")
    budget, min_len, max_len = spec.get("tokens", 16384), spec.get("min_len", 512), spec.get("max_len", 4096)
    if name == "tiny":
        min_len, max_len, budget = min(min_len, 32), min(max_len, 64), min(budget, 256)
    steps, warmup = spec.get("steps", 3), spec.get("warmup", 1)
    precision = spec.get("precision", "amp")
    if precision not in ("amp", "bf16"):
        fail(f"precision '{precision}' unknown: use amp or bf16")
    device = spec.get("device", "cuda")

    try:
        import torch
        import transformers
        from transformers import Qwen3Config, Qwen3ForCausalLM
    except ImportError as e:
        fail(f"{e.name or e} is not available for {sys.executable}: it needs torch and transformers (>= 4.51, for Qwen3)")

    if device == "cuda" and not torch.cuda.is_available():
        fail("no CUDA device (torch.cuda.is_available() is False); pass {\"device\": \"cpu\", \"model\": \"tiny\"} to check the script")
    torch.manual_seed(spec.get("seed", 0))
    cfg = dict(vocab_size=151936, max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1e6,
               tie_word_embeddings=True, hidden_act="silu", attention_bias=False)
    cfg.update(SHAPES[name])
    config = Qwen3Config(**cfg)
    param_dtype = torch.float32 if precision == "amp" else torch.bfloat16
    t0 = time.perf_counter()
    with torch.device(device):
        model = Qwen3ForCausalLM._from_config(config, torch_dtype=param_dtype, attn_implementation="sdpa")
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    ckpt = spec.get("checkpointing")
    if ckpt is None:
        ckpt = n_params >= 1e9
    if ckpt:
        model.gradient_checkpointing_enable()
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=spec.get("lr", 1e-5), fused=(device == "cuda"))
    build_s = time.perf_counter() - t0

    rng = random.Random(spec.get("seed", 0))
    batches = pack(rng, budget, min_len, max_len, warmup + steps)
    data = [[torch.randint(0, config.vocab_size, (L,), device=device) for L in lens] for lens in batches]
    V, D, Hq, layers = config.vocab_size, config.head_dim, config.num_attention_heads, config.num_hidden_layers
    # Model FLOPs of one training step (forward + backward = 3 x forward): 2 flops per linear
    # weight and token (the tied embedding counts once, as the lm-head GEMM; its gather is free;
    # norm weights are not GEMMs), and attention, 4 t H D per layer for a token with t causal keys
    # (QK^T and PV).
    linear = n_params - sum(p.numel() for n, p in model.named_parameters() if "norm" in n)

    def step_flops(lens):
        attn = sum(4 * (L * (L + 1) / 2) * Hq * D * layers for L in lens)
        return 3 * (2 * linear * sum(lens) + attn)

    def step(seqs):
        total = sum(s.shape[0] for s in seqs)
        for ids in seqs:
            L = ids.shape[0]
            pos = torch.arange(L, device=device)[None]
            with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=(precision == "amp")):
                out = model(input_ids=ids[None], position_ids=pos, labels=ids[None], use_cache=False)
            # HF's loss is the mean over the L - 1 predicted tokens; weight it by the sequence's share
            (out.loss * (L / total)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for i in range(warmup):
        step(data[i])
    times = []
    for i in range(warmup, warmup + steps):
        times.append(time_ms(lambda: step(data[i]), reps=1, warmup=0)[0])
    tokens = [sum(lens) for lens in batches[warmup:]]
    tok_s = [t / (ms / 1e3) for t, ms in zip(tokens, times)]
    flops = [step_flops(lens) for lens in batches[warmup:]]
    out = {
        "bench": "torch_gpu_model",
        "model": f"Qwen3-{name}" if name != "tiny" else "tiny",
        "parameters": n_params,
        "precision": precision,
        "attn": "sdpa",
        "fused_adamw": device == "cuda",
        "gradient_checkpointing": bool(ckpt),
        "packing": "whole sequences up to the token budget, each its own [1, L] row (no padding, no mask), gradients accumulated, one AdamW step per micro-batch",
        "micro_batch_tokens": tokens,
        "sequences_per_micro_batch": [len(lens) for lens in batches[warmup:]],
        "step_ms": times,
        "tokens_per_s": sorted(tok_s)[len(tok_s) // 2],
        "tokens_per_s_all": tok_s,
        "model_tflops_per_s": sorted(f / (ms / 1e3) / 1e12 for f, ms in zip(flops, times))[len(times) // 2],
        "flops_note": "3 x (2 x linear weights x tokens + 4 t H D per layer and token); MFU is this over the peak the caller measures",
        "peak_memory_bytes": torch.cuda.max_memory_allocated() if device == "cuda" else None,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved() if device == "cuda" else None,
        "build_s": build_s,
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    if any(not math.isfinite(x) for x in tok_s):
        fail("a step time was not finite")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
