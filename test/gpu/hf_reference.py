#!/usr/bin/env python3
"""Hugging Face transformers as the reference of the GPU engine (issue 13, "an implementation nobody
here wrote"): loads Qwen3ForCausalLM / Olmo2ForCausalLM from a model directory and, for one packed
batch, writes the logits, per-token log-probs, the mean token cross-entropy loss and every
parameter's gradient to a safetensors file.

Usage:
  python3 test/gpu/hf_reference.py --model DIR --out FILE [--batch FILE|-] [--dtype float32|bfloat16]
                                   [--device cuda|cpu] [--attn eager|sdpa]

The batch (JSON, from --batch FILE or stdin): {"tokens": [T ints], "positions": [T ints],
"seq_offsets": [n_seqs + 1 ints, 0 .. T], "mask": [T bools] (optional)}. Each sequence
seq_offsets[i] .. seq_offsets[i+1] runs as its own forward pass (input_ids [1, L], position_ids
from `positions`), so no attention crosses sequences; their outputs are concatenated in batch order.

Conventions (those of the native engine and test/fixtures/model/make_model_fixtures.py):
  logp[t] = log softmax(logits[t - 1])[tokens[t]], 0 at the first token of each sequence;
  loss    = -sum(logp[t] mask[t]) / sum(mask[t]), mask defaulting to every non-first token;
  one backward pass of that loss over the whole batch gives the gradients.

Output (written atomically, all tensors f32 whatever --dtype): "logits" [T, V], "logp" [T],
"loss" [1], and "grad.<name>" for every parameter of model.named_parameters() (HF names; a tied
lm_head is not listed separately: its gradient is part of model.embed_tokens.weight's). A line of
JSON on stdout: the model type, dtype, device, attention implementation, T, loss and versions.
Needs torch and transformers (>= 4.51 for Qwen3); the GPU machine has torch 2.11.

Checked on a CPU (torch 2.14.1, transformers 5.18.0, float32, eager and sdpa) against the committed
fixtures of test/fixtures/model/ (make_model_fixtures.py, an independent PyTorch implementation):
logits within 3.1e-6 and log-probs within 2e-6 absolute on all four cases; on the cross-entropy case
(olmo2_tied_f32_ce, whose loss is this one) the same loss and every gradient within 1.8e-6 of the
largest entry of its tensor.
"""
import argparse
import json
import os
import struct
import sys


def read_batch(path):
    text = sys.stdin.read() if path in (None, "-") else open(path).read()
    b = json.loads(text)
    for key in ("tokens", "positions", "seq_offsets"):
        if key not in b:
            raise SystemExit(f"hf_reference: the batch has no '{key}': give tokens, positions and seq_offsets")
    T = len(b["tokens"])
    offs = b["seq_offsets"]
    if len(b["positions"]) != T:
        raise SystemExit(f"hf_reference: positions has {len(b['positions'])} entries, tokens {T}: give one position per token")
    if not offs or offs[0] != 0 or offs[-1] != T or any(b2 < a for a, b2 in zip(offs, offs[1:])):
        raise SystemExit(f"hf_reference: seq_offsets must rise from 0 to the token count {T}")
    if "mask" in b and len(b["mask"]) != T:
        raise SystemExit(f"hf_reference: mask has {len(b['mask'])} entries, tokens {T}: give one per token or none")
    return b


def load_model(model_dir, dtype, device, attn):
    import torch
    import transformers

    with open(os.path.join(model_dir, "config.json")) as f:
        model_type = json.load(f).get("model_type")
    classes = {"qwen3": "Qwen3ForCausalLM", "olmo2": "Olmo2ForCausalLM"}
    if model_type not in classes:
        raise SystemExit(f"hf_reference: model_type '{model_type}' in {model_dir}/config.json: only qwen3 and olmo2 are references")
    cls = getattr(transformers, classes[model_type], None)
    if cls is None:
        raise SystemExit(f"hf_reference: transformers {transformers.__version__} has no {classes[model_type]}: upgrade transformers")
    td = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    model = cls.from_pretrained(model_dir, torch_dtype=td, attn_implementation=attn)
    model.to(device)
    model.train()  # no dropout in these models; gradients on
    return model, model_type


def token_logp(logits, tokens):
    """logp[i] = log softmax(logits[i - 1])[tokens[i]] within one sequence, 0 at i = 0."""
    import torch

    lp = torch.log_softmax(logits.float(), dim=-1)
    out = torch.zeros(tokens.shape[0], dtype=torch.float32, device=logits.device)
    if tokens.shape[0] > 1:
        out[1:] = lp[:-1].gather(1, tokens[1:, None])[:, 0]
    return out


def run(model, batch, device):
    import torch

    tokens = torch.tensor(batch["tokens"], dtype=torch.long, device=device)
    pos = torch.tensor(batch["positions"], dtype=torch.long, device=device)
    offs = batch["seq_offsets"]
    T = tokens.shape[0]
    if "mask" in batch:
        mask = torch.tensor([bool(m) for m in batch["mask"]], device=device)
    else:
        mask = torch.ones(T, dtype=torch.bool, device=device)
    first = torch.zeros(T, dtype=torch.bool, device=device)
    for a, b in zip(offs[:-1], offs[1:]):
        if b > a:
            first[a] = True
    mask = mask & ~first
    if int(mask.sum()) == 0:
        raise SystemExit("hf_reference: no token counts towards the loss (the mask leaves only first tokens)")
    model.zero_grad(set_to_none=True)
    logits_all, logp_all = [], []
    for a, b in zip(offs[:-1], offs[1:]):
        if b == a:
            continue
        out = model(input_ids=tokens[None, a:b], position_ids=pos[None, a:b], use_cache=False)
        lg = out.logits[0]
        logits_all.append(lg)
        logp_all.append(token_logp(lg, tokens[a:b]))
    logp = torch.cat(logp_all)
    m = mask.float()
    loss = -(logp * m).sum() / m.sum()
    loss.backward()
    return torch.cat(logits_all).detach().float(), logp.detach(), loss.detach().float()


def write_safetensors(path, tensors):
    """f32 tensors [(name, tensor)] as a safetensors file, written to a temporary name then renamed."""
    import torch

    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors:
        t = t.detach().to("cpu", torch.float32).contiguous()
        raw = t.view(torch.int32).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(h)))
            f.write(h)
            for r in blobs:
                f.write(r)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="Hugging Face model directory (config.json + safetensors)")
    ap.add_argument("--out", required=True, help="safetensors file to write")
    ap.add_argument("--batch", default="-", help="batch JSON file, or - for stdin (default)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--attn", default="eager", choices=["eager", "sdpa"], help="transformers attention implementation")
    args = ap.parse_args(argv)

    try:
        import torch
        import transformers
    except ImportError as e:
        raise SystemExit(f"hf_reference: {e.name} is not installed for {sys.executable}: it needs torch and transformers")

    batch = read_batch(args.batch)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, model_type = load_model(args.model, args.dtype, device, args.attn)
    if max(batch["tokens"], default=0) >= model.config.vocab_size or min(batch["tokens"], default=0) < 0:
        raise SystemExit(f"hf_reference: a token id is outside [0, {model.config.vocab_size}) of this model")
    logits, logp, loss = run(model, batch, device)
    tensors = [("logits", logits), ("logp", logp), ("loss", loss.reshape(1))]
    for name, p in model.named_parameters():
        g = p.grad if p.grad is not None else torch.zeros_like(p)
        tensors.append((f"grad.{name}", g))
    write_safetensors(args.out, tensors)
    print(json.dumps({
        "out": args.out, "model_type": model_type, "dtype": args.dtype, "device": device, "attn": args.attn,
        "tokens": len(batch["tokens"]), "sequences": len(batch["seq_offsets"]) - 1, "loss": float(loss),
        "parameters": sum(1 for _ in model.named_parameters()),
        "torch": torch.__version__, "transformers": transformers.__version__,
    }))


if __name__ == "__main__":
    main()
