#!/usr/bin/env python3
"""The Hugging Face peer of the device generation benchmark (bench/gpu-generate.bench.ts, issue 14):
transformers' `generate` on Qwen3ForCausalLM built from a config of the requested shape (Qwen3-0.6B
or Qwen3-1.7B; random weights), bf16, sdpa attention, its default KV cache, greedy, a fixed number
of new tokens (eos disabled), batches of equal-length random prompts. Prints one JSON line.

Usage: python3 bench/torch_gpu_generate.py [--shape 0.6B|1.7B|tiny] [--device cuda|cpu]
         [--batch 1,32,256] [--prompt 1024] [--new-tokens 128] [--reps 2] [--seed 0]
  --shape tiny is a few-MB model (vocab 512) to check this script on a CPU; its defaults are
  --prompt 64 --new-tokens 16 --batch 1,4.

Decode tokens/s of a batch B: B x (N - 1) / (t(N) - t(1)), where t(k) is the median wall time of
generate() with k new tokens on the same prompts (t(1) is the prefill and the first token; the
difference is the N - 1 decode steps alone). The end-to-end rate B x N / t(N) is reported too. Each
configuration runs one untimed generate() first (allocator and kernel warm-up).

When torch or transformers is missing, or the device is not usable, it still prints one JSON line,
with "rows": null and "reason" saying why, and exits 0 (the benchmark reports torch_ratio null with
that reason). Bad arguments exit 2 with one line.

The peer's configuration is recorded as bench/peer.ts's TorchPeer ("peer": torch_peer.peer_info:
torch version, CPU threads, BLAS) plus the device side ("cuda": CUDA / cuDNN versions, the device,
which sdpa backends are enabled) and the transformers version.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from torch_gpu_model import SHAPES  # noqa: E402  (the Qwen3 0.6B / 1.7B shapes and tiny, one table for both torch peers)


def args_of(argv):
    p = argparse.ArgumentParser(prog="torch_gpu_generate.py", description="HF transformers generate: decode tokens/s")
    p.add_argument("--shape", default="0.6B", choices=sorted(SHAPES))
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--batch", default=None, help="comma-separated batch sizes (default 1,32,256; tiny: 1,4)")
    p.add_argument("--prompt", type=int, default=None, help="prompt tokens (default 1024; tiny: 64)")
    p.add_argument("--new-tokens", type=int, default=None, help="new tokens per sequence (default 128; tiny: 16)")
    p.add_argument("--reps", type=int, default=2, help="timed generate() calls per configuration and length")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    tiny = a.shape == "tiny"
    a.prompt = a.prompt if a.prompt is not None else (64 if tiny else 1024)
    a.new_tokens = a.new_tokens if a.new_tokens is not None else (16 if tiny else 128)
    batch = a.batch if a.batch is not None else ("1,4" if tiny else "1,32,256")
    try:
        a.batches = [int(x) for x in batch.split(",")]
    except ValueError:
        p.error(f"--batch must be comma-separated integers, got '{batch}'")
    if any(b < 1 for b in a.batches):
        p.error(f"--batch sizes must be >= 1, got '{batch}'")
    if a.prompt < 1 or a.new_tokens < 2 or a.reps < 1:
        p.error("--prompt >= 1, --new-tokens >= 2 (decode needs two lengths) and --reps >= 1")
    return a


def none(a, reason, **extra):
    """The one line printed when no figure can be measured."""
    print(json.dumps({"bench": "torch_gpu_generate", "model": a.shape, "device": a.device, "rows": None, "reason": reason, **extra}))
    sys.exit(0)


def main():
    a = args_of(sys.argv[1:])
    try:
        import torch
        import transformers
        from transformers import Qwen3Config, Qwen3ForCausalLM
    except ImportError as e:
        none(a, f"{e.name or e} is not available for {sys.executable}: the peer needs torch and transformers (>= 4.51, for Qwen3)")
    from torch_peer import peer_info

    if a.device == "cuda" and not torch.cuda.is_available():
        none(a, "no CUDA device (torch.cuda.is_available() is False); --device cpu --shape tiny checks the script", torch=torch.__version__)
    threads = os.cpu_count() or 1
    peer = peer_info(threads)
    cuda = None
    if a.device == "cuda":
        be = torch.backends.cuda
        cuda = {
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(),
            "device": torch.cuda.get_device_name(0),
            "capability": ".".join(map(str, torch.cuda.get_device_capability(0))),
            "sdpa_backends": {"flash": be.flash_sdp_enabled(), "mem_efficient": be.mem_efficient_sdp_enabled(),
                              "cudnn": getattr(be, "cudnn_sdp_enabled", lambda: None)(), "math": be.math_sdp_enabled()},
        }

    torch.manual_seed(a.seed)
    cfg = dict(vocab_size=151936, max_position_embeddings=40960, rms_norm_eps=1e-6, rope_theta=1e6,
               tie_word_embeddings=True, hidden_act="silu", attention_bias=False)
    cfg.update(SHAPES[a.shape])
    config = Qwen3Config(**cfg)
    if a.prompt + a.new_tokens > config.max_position_embeddings:
        print(f"torch_gpu_generate: --prompt {a.prompt} + --new-tokens {a.new_tokens} exceeds the context "
              f"({config.max_position_embeddings}); lower one", file=sys.stderr)
        sys.exit(2)
    t0 = time.perf_counter()
    # transformers 5 names the argument dtype (torch_dtype is deprecated there); 4.x knows torch_dtype
    dtype_kw = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    with torch.device(a.device):
        model = Qwen3ForCausalLM._from_config(config, attn_implementation="sdpa", **{dtype_kw: torch.bfloat16})
    model.eval()
    build_s = time.perf_counter() - t0
    n_params = sum(p.numel() for p in model.parameters())
    # greedy, exactly new_tokens tokens: no eos, no stop strings, no sampling
    gc = model.generation_config
    gc.eos_token_id = None
    gc.pad_token_id = 0
    gc.do_sample = False
    gc.temperature = gc.top_p = gc.top_k = None
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)

    g = torch.Generator(device="cpu").manual_seed(a.seed)
    rows = []
    for B in a.batches:
        ids = torch.randint(0, config.vocab_size, (B, a.prompt), generator=g).to(a.device)
        mask = torch.ones_like(ids)

        def gen(k):
            with torch.inference_mode():
                out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=k, min_new_tokens=k, use_cache=True)
            sync()
            return out

        try:
            out = gen(a.new_tokens)  # warm-up
            if out.shape != (B, a.prompt + a.new_tokens):
                raise RuntimeError(f"generate() returned shape {tuple(out.shape)}, expected {(B, a.prompt + a.new_tokens)}")
            times = {}
            for k in (1, a.new_tokens):
                ts = []
                for _ in range(a.reps):
                    t = time.perf_counter()
                    gen(k)
                    ts.append((time.perf_counter() - t) * 1e3)
                times[k] = ts
        except torch.OutOfMemoryError as e:  # a batch that does not fit: say so, keep the others
            rows.append({"batch": B, "decode_tokens_per_s": None, "reason": f"out of memory: {str(e).splitlines()[0]}"})
            torch.cuda.empty_cache()
            continue
        t1, tn = statistics.median(times[1]), statistics.median(times[a.new_tokens])
        decode_ms = tn - t1
        rows.append({
            "batch": B,
            "prefill_ms": t1,
            "generate_ms": tn,
            "decode_ms": decode_ms,
            "decode_tokens_per_s": B * (a.new_tokens - 1) / (decode_ms / 1e3) if decode_ms > 0 else None,
            "e2e_tokens_per_s": B * a.new_tokens / (tn / 1e3),
            "times_ms": {"1": times[1], str(a.new_tokens): times[a.new_tokens]},
            "peak_memory_bytes": torch.cuda.max_memory_allocated() if a.device == "cuda" else None,
        })
        if a.device == "cuda":
            torch.cuda.reset_peak_memory_stats()

    print(json.dumps({
        "bench": "torch_gpu_generate",
        "model": f"Qwen3-{a.shape}" if a.shape != "tiny" else "tiny",
        "parameters": n_params,
        "device": a.device,
        "dtype": "bfloat16",
        "attn": "sdpa",
        "cache": "transformers' default (DynamicCache), no torch.compile",
        "decoding": "greedy, eos disabled, min_new_tokens = max_new_tokens",
        "prompt_tokens": a.prompt,
        "new_tokens": a.new_tokens,
        "reps": a.reps,
        "rows": rows,
        "method": "decode tokens/s = B (N - 1) / (t(N) - t(1)), t = median wall time of generate() with that many new tokens",
        "build_s": build_s,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peer": peer,
        "cuda": cuda,
    }))


if __name__ == "__main__":
    main()
