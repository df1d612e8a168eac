#!/usr/bin/python3
"""PyTorch CPU timings of the equivalents of murphy-native's kernels, for bench/run.ts.

Usage: /usr/bin/python3 bench/torch_kernels.py '<json spec>'   (bench/run.ts builds the spec)
Prints one JSON object: {"peer": torch_peer.peer_info(...), "cases": {name: median_ms}}; the peer
runs on spec["threads"] threads (the machine's cores) and says which BLAS it really loaded.
Each case is what a PyTorch user would write: log_softmax + gather (and its backward through
autograd), the TRL GRPOTrainer loss, torch.optim.AdamW.step().
"""
import json
import os
import sys

import torch

from torch_peer import peer_info, time_ms


def median_ms(fn, reps, warmup=1):
    return time_ms(fn, reps, warmup)[1]


def main():
    spec = json.loads(sys.argv[1])
    peer = peer_info(spec.get("threads", os.cpu_count() or 1))
    reps = spec.get("reps", 3)
    out = {}
    g = torch.Generator().manual_seed(0)

    for lp in spec.get("logprob", []):
        n, v, dt = lp["n"], lp["v"], lp["dtype"]
        dtype = torch.float32 if dt == "f32" else torch.bfloat16
        z = (torch.randn(n, v, generator=g) * 3).to(dtype)
        y = torch.randint(0, v, (n,), generator=g)

        def fwd():
            with torch.no_grad():
                return torch.log_softmax(z.float() if dtype != torch.float32 else z, dim=-1).gather(1, y[:, None])

        out[f"logprob_fwd_{dt}"] = median_ms(fwd, reps)
        zz = z.clone().requires_grad_(True)
        gl = torch.randn(n, 1, generator=g)

        def bwd():
            zz.grad = None
            lp_ = torch.log_softmax(zz.float() if dtype != torch.float32 else zz, dim=-1).gather(1, y[:, None])
            lp_.backward(gl)

        # forward + backward, as autograd must redo the softmax; reported as such
        out[f"logprob_fwdbwd_{dt}"] = median_ms(bwd, reps)
        del z, zz

    for gs in spec.get("grpo", []):
        t = gs["tokens"]
        seqlen = gs["seqlen"]
        b = t // seqlen
        logp = (torch.randn(b, seqlen, generator=g) * 0.1 - 1).requires_grad_(True)
        old = logp.detach() + torch.randn(b, seqlen, generator=g) * 0.1
        adv = torch.randn(b, 1, generator=g).expand(b, seqlen)
        mask = (torch.rand(b, seqlen, generator=g) < 0.9).float()
        eps_low, eps_high = 0.2, 0.28

        def loss_fn():
            logp.grad = None
            coef_1 = torch.exp(logp - old)
            coef_2 = torch.clamp(coef_1, 1 - eps_low, 1 + eps_high)
            per_token = -torch.min(coef_1 * adv, coef_2 * adv)
            loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)  # TRL loss_type="dapo"
            loss.backward()
            # the statistics TRL logs
            is_low = ((coef_1 < 1 - eps_low) & (adv < 0)).float()
            is_high = ((coef_1 > 1 + eps_high) & (adv > 0)).float()
            return (is_low * mask).sum().item(), (is_high * mask).sum().item(), loss.item()

        out["grpo_loss"] = median_ms(loss_fn, reps)

    for aw in spec.get("adamw", []):
        n = aw["params"]
        p = torch.nn.Parameter(torch.randn(n, generator=g) * 0.02)
        p.grad = torch.randn(n, generator=g) * 1e-3
        opt = torch.optim.AdamW([p], lr=1e-5, weight_decay=0.01)
        out["adamw"] = median_ms(opt.step, reps)
        if aw.get("clip"):
            def clipped():
                torch.nn.utils.clip_grad_norm_([p], 1.0)
                opt.step()
            out["adamw_clip"] = median_ms(clipped, reps)
        del p, opt

    for cp in spec.get("copy", []):
        a = torch.randn(cp["n"], generator=g)
        b = torch.empty_like(a)
        out["copy"] = median_ms(lambda: b.copy_(a), reps)

    print(json.dumps({"peer": peer, "cases": out}))


if __name__ == "__main__":
    main()
