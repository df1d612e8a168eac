// Policy model benchmark: `node --import tsx bench/model.bench.ts [--json FILE] [--quick] [--no-torch]`
//
// Training tokens per second (forward + loss + backward + AdamW, cross-entropy over every
// token) and generation tokens per second (batched greedy decode with a KV cache) of the
// native CPU engine, against PyTorch CPU (Debian's python3-torch) on the same configs, with the
// same thread count, in the same run. torch_ratio = native throughput / PyTorch throughput.
// PyTorch generates as transformers does without continuous batching: one sequence at a time
// with its own KV cache (torch.cat per step); the native engine decodes all prompts in one batch.
// Peak memory: the engine's own report plus the process's max RSS for each side.
// The peer's BLAS and thread count are recorded (bench/torch_peer.py); a peer on the reference
// BLAS or on fewer threads than the machine's cores is flagged unfair and gets no ratio. A GEMM
// peer figure (torch.mm and numpy.matmul, float32) on each config's own matrix shapes (forward,
// input gradient and weight gradient of the projections, the LM head, one decode step) is
// measured in the same run.
// Configs: "small" (4 layers, hidden 256, vocab 32768) and Qwen3-0.6B's layer shape
// (hidden 1024, 16/8 heads of 128, intermediate 3072, vocab 151936) truncated to 2 layers.
import { spawnSync } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { packSequences, PolicyModel } from '../lib/model/index.js';
import { cpuInfo } from '../lib/native.js';
import { machineInfo } from './common.js';
import { gemmShapes, modelCases, type ModelCase } from './model-shapes.js';
import { describePeer, peerEnv, peerEnvDropped, type TorchPeer } from './peer.js';

const argv = process.argv.slice(2);
const flag = (f: string) => argv.includes(f);
const opt = (f: string) => { const i = argv.indexOf(f); return i >= 0 ? argv[i + 1] : undefined; };
const quick = flag('--quick');
const log = (s: string) => process.stderr.write(s + '\n');

type Case = ModelCase;
const cases: Case[] = modelCases(quick);

interface Row { name: string; metric: string; shape: string; native: number; torch: number | null; unit: string; torch_ratio: number | null; native_peak_mb: number; torch_peak_mb: number | null }
const rows: Row[] = [];
const threads = cpuInfo().threads;

const TORCH = String.raw`
import json, math, resource, sys, time, torch
cfg = json.loads(sys.argv[1]); torch.set_num_threads(int(sys.argv[2])); torch.manual_seed(0)
H, I, V, L = cfg['hiddenSize'], cfg['intermediateSize'], cfg['vocabSize'], cfg['numLayers']
nh, nkv, D = cfg['numHeads'], cfg['numKvHeads'], cfg['headDim']
def P(*s): return torch.nn.Parameter(torch.randn(*s) * 0.02)
def N(n): return torch.nn.Parameter(torch.ones(n))
W = {'emb': P(V, H), 'norm': N(H)}
for l in range(L):
    W.update({f'{l}.n1': N(H), f'{l}.q': P(nh*D, H), f'{l}.k': P(nkv*D, H), f'{l}.v': P(nkv*D, H), f'{l}.o': P(H, nh*D),
              f'{l}.qn': N(D), f'{l}.kn': N(D), f'{l}.n2': N(H), f'{l}.g': P(I, H), f'{l}.u': P(I, H), f'{l}.d': P(H, I)})
def rms(x, w): return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
inv = 1.0 / (cfg.get('ropeTheta', 10000.0) ** (torch.arange(0, D, 2).float() / D))
def rope(x, pos):
    a = pos.float()[:, None] * inv[None]; e = torch.cat([a, a], -1); c, s = e.cos()[:, None], e.sin()[:, None]
    return x * c + torch.cat([-x[..., D//2:], x[..., :D//2]], -1) * s
def layer(l, x, pos, cache=None, mask=None):
    T = x.shape[0]; a = rms(x, W[f'{l}.n1'])
    q = rope(rms((a @ W[f'{l}.q'].T).view(T, nh, D), W[f'{l}.qn']), pos)
    k = rope(rms((a @ W[f'{l}.k'].T).view(T, nkv, D), W[f'{l}.kn']), pos)
    v = (a @ W[f'{l}.v'].T).view(T, nkv, D)
    if cache is not None:
        if l in cache: k = torch.cat([cache[l][0], k]); v = torch.cat([cache[l][1], v])
        cache[l] = (k, v)
    kk = k.repeat_interleave(nh // nkv, 1).transpose(0, 1); vv = v.repeat_interleave(nh // nkv, 1).transpose(0, 1)
    s = q.transpose(0, 1) @ kk.transpose(1, 2) / math.sqrt(D)
    if mask is not None: s = s.masked_fill(~mask, float('-inf'))
    o = (torch.softmax(s, -1) @ vv).transpose(0, 1).reshape(T, nh * D) @ W[f'{l}.o'].T
    h = x + o; m = rms(h, W[f'{l}.n2'])
    return h + (torch.nn.functional.silu(m @ W[f'{l}.g'].T) * (m @ W[f'{l}.u'].T)) @ W[f'{l}.d'].T
def hidden(tok, pos, mask, cache=None):
    x = W['emb'][tok]
    for l in range(L): x = layer(l, x, pos, cache, mask)
    return rms(x, W['norm'])
out = {}
seqs, slen = int(sys.argv[3]), int(sys.argv[4]); T = seqs * slen
tok = torch.randint(0, V, (T,)); pos = torch.arange(slen).repeat(seqs); sid = torch.arange(seqs).repeat_interleave(slen)
idx = torch.arange(T); mask = (sid[:, None] == sid[None]) & (idx[None] <= idx[:, None])
first = pos == 0
opt = torch.optim.AdamW(list(W.values()), lr=1e-4, weight_decay=0.0)
def step():
    opt.zero_grad(); x = hidden(tok, pos, mask); lp = torch.log_softmax(x[:-1] @ W['emb'].T, -1).gather(1, tok[1:, None])[:, 0]
    keep = ~first[1:]; loss = -(lp * keep).sum() / keep.sum(); loss.backward()
    torch.nn.utils.clip_grad_norm_(list(W.values()), 1.0); opt.step()
step()
it = int(sys.argv[5]); t0 = time.perf_counter()
for _ in range(it): step()
out['train_tps'] = T * it / (time.perf_counter() - t0)
np_, plen, new = int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
with torch.no_grad():
    t0 = time.perf_counter(); gen = 0
    for p in range(np_):  # HF-style: one cache per sequence, greedy
        cache = {}; pt = torch.randint(0, V, (plen,)); m = torch.ones(plen, plen, dtype=torch.bool).tril()
        x = hidden(pt, torch.arange(plen), m, cache); nxt = int(torch.argmax(x[-1] @ W['emb'].T)); gen += 1
        for i in range(new - 1):
            x = hidden(torch.tensor([nxt]), torch.tensor([plen + i]), None, cache); nxt = int(torch.argmax(x[-1] @ W['emb'].T)); gen += 1
    out['gen_tps'] = gen / (time.perf_counter() - t0)
out['peak_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
`;

const PEER = String.raw`
import json, sys, torch_peer
threads, shapes = int(sys.argv[1]), json.loads(sys.argv[2])
info = torch_peer.peer_info(threads)
print(json.dumps({'peer': info, 'gemm': torch_peer.gemm([tuple(x) for x in shapes], 3)}))
`;

/** The peer's configuration and GEMM figures on the configs' shapes; null without torch. */
function runPeer(): { peer: TorchPeer; gemm: unknown } | null {
  if (flag('--no-torch')) return null;
  const shapes = cases.flatMap((c) => gemmShapes(c).map(([name, m, k, n]) => [name, m, k, n]));
  log(`PyTorch peer: configuration and GEMM on ${shapes.length} model shapes ...`);
  const r = spawnSync('/usr/bin/python3', ['-c', PEER, String(threads), JSON.stringify(shapes)], {
    encoding: 'utf8', maxBuffer: 1 << 24, env: peerEnv({ PYTHONPATH: new URL('.', import.meta.url).pathname }),
  });
  if (r.status !== 0) {
    log(`PyTorch peer unavailable (${(r.stderr || r.error?.message || '').trim().split('\n').pop()}); torch columns left empty`);
    return null;
  }
  const out = JSON.parse(r.stdout.trim().split('\n').pop()!) as { peer: TorchPeer; gemm: unknown };
  log(describePeer(out.peer, threads));
  return out;
}
const peer = runPeer();

function runTorch(c: Case): { train_tps: number; gen_tps: number; peak_mb: number } | null {
  if (!peer) return null;
  const r = spawnSync('/usr/bin/python3', ['-c', TORCH, JSON.stringify(c.sizes), String(threads), String(c.seqs), String(c.seqLen),
    String(c.trainIters), String(c.prompts), String(c.promptLen), String(c.newTokens)], { encoding: 'utf8', maxBuffer: 1 << 24, env: peerEnv() });
  if (r.status !== 0) {
    log(`PyTorch run failed (${(r.stderr || r.error?.message || '').trim().split('\n').pop()}); torch_ratio left empty`);
    return null;
  }
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as { train_tps: number; gen_tps: number; peak_mb: number };
}

const rssMb = () => process.resourceUsage().maxRSS / 1024;

for (const c of cases) {
  const s = c.sizes;
  const shape = `${s.numLayers}L h${s.hiddenSize} i${s.intermediateSize} v${s.vocabSize} ${s.numHeads}/${s.numKvHeads}x${s.headDim}`;
  log(`model.bench: ${c.name} (${shape}), ${threads} threads`);
  const m = await PolicyModel.random(s, { seed: 1 });
  const rand = (n: number) => Array.from({ length: n }, (_, i) => (i * 7919 + 13) % s.vocabSize);
  const batch = packSequences(Array.from({ length: c.seqs }, (_, k) => rand(c.seqLen).map((x) => (x + k) % s.vocabSize)));
  const T = batch.tokens.length;
  const step = async () => {
    await m.accumulate(batch, { crossEntropy: true });
    await m.optimizerStep({ lr: 1e-4, maxGradNorm: 1 });
  };
  // tokens/s over trainIters steps after one untimed step
  const trainRate = async () => {
    await step();
    const t = performance.now();
    for (let i = 0; i < c.trainIters; i++) await step();
    return (T * c.trainIters) / ((performance.now() - t) / 1000);
  };
  const trainTps = await trainRate();
  // the same steps with the layers' forward products on the bf16 copy (setBf16({ forward }): AMX
  // tiles or vdpbf16ps where the CPU has them; the backward and the loss's head stay fp32)
  m.setBf16({ forward: true });
  const trainBf16Tps = await trainRate();
  m.setBf16({ forward: false });
  const prompts = Array.from({ length: c.prompts }, (_, k) => rand(c.promptLen).map((x) => (x + 3 * k) % s.vocabSize));
  // fp32 and bf16-weight generation (PolicyModel.setBf16), interleaved, best of `rounds`
  const genRate = async (bf16: boolean) => {
    m.setBf16({ generate: bf16 });  // switching off frees the bf16 copy: the warm-up rebuilds it, untimed
    await m.generate(prompts.slice(0, 1), { maxNewTokens: 1, temperature: 0 });
    const t0 = performance.now();
    const gens = await m.generate(prompts, { maxNewTokens: c.newTokens, temperature: 0 });
    return gens.reduce((a, g) => a + g.tokens.length, 0) / ((performance.now() - t0) / 1000);
  };
  await m.generate(prompts.slice(0, 1), { maxNewTokens: 2, temperature: 0 });
  let genTps = 0, genBf16Tps = 0;
  for (let r = 0; r < (quick ? 1 : 2); r++) {
    genTps = Math.max(genTps, await genRate(false));
    genBf16Tps = Math.max(genBf16Tps, await genRate(true));
  }
  m.setBf16({ generate: false });
  const mem = m.memory();
  const nativePeak = rssMb();
  log(`  native: train ${trainTps.toFixed(0)} tok/s (bf16 forward: ${trainBf16Tps.toFixed(0)}, ${(trainBf16Tps / trainTps).toFixed(2)}x), generate ${genTps.toFixed(1)} tok/s (bf16 weights: ${genBf16Tps.toFixed(1)}, ${(genBf16Tps / genTps).toFixed(2)}x); engine memory: weights ${(mem.weights / 2 ** 20).toFixed(0)} MiB, grads ${(mem.grads / 2 ** 20).toFixed(0)}, AdamW ${(mem.optimizer / 2 ** 20).toFixed(0)}, activations peak ${(mem.activationsPeak / 2 ** 20).toFixed(0)}; process max RSS ${nativePeak.toFixed(0)} MiB`);
  const t = runTorch(c);
  if (t) log(`  torch:  train ${t.train_tps.toFixed(0)} tok/s, generate ${t.gen_tps.toFixed(1)} tok/s; max RSS ${t.peak_mb.toFixed(0)} MiB`);
  rows.push({ name: c.name, metric: 'train_tokens_per_s', shape: `${shape}, ${c.seqs}x${c.seqLen} tokens`, native: trainTps, torch: t?.train_tps ?? null, unit: 'tok/s', torch_ratio: t && peer?.peer.fair ? trainTps / t.train_tps : null, native_peak_mb: nativePeak, torch_peak_mb: t?.peak_mb ?? null });
  rows.push({ name: c.name, metric: 'train_bf16_forward_tokens_per_s', shape: `${shape}, ${c.seqs}x${c.seqLen} tokens, the layers' forward products on bf16 weights; native = bf16 forward / fp32 ${(trainBf16Tps / trainTps).toFixed(2)}x`, native: trainBf16Tps, torch: t?.train_tps ?? null, unit: 'tok/s', torch_ratio: t && peer?.peer.fair ? trainBf16Tps / t.train_tps : null, native_peak_mb: nativePeak, torch_peak_mb: t?.peak_mb ?? null });
  rows.push({ name: c.name, metric: 'generate_tokens_per_s', shape: `${shape}, ${c.prompts} prompts x ${c.promptLen} + ${c.newTokens} new (greedy)`, native: genTps, torch: t?.gen_tps ?? null, unit: 'tok/s', torch_ratio: t && peer?.peer.fair ? genTps / t.gen_tps : null, native_peak_mb: nativePeak, torch_peak_mb: t?.peak_mb ?? null });
  rows.push({ name: c.name, metric: 'generate_bf16_tokens_per_s', shape: `${shape}, ${c.prompts} prompts x ${c.promptLen} + ${c.newTokens} new (greedy), bf16 weights; native = bf16 / fp32 ${(genBf16Tps / genTps).toFixed(2)}x`, native: genBf16Tps, torch: t?.gen_tps ?? null, unit: 'tok/s', torch_ratio: t && peer?.peer.fair ? genBf16Tps / t.gen_tps : null, native_peak_mb: nativePeak, torch_peak_mb: t?.peak_mb ?? null });
}

console.log('case                 metric                              native      torch   torch_ratio');
if (peer && !peer.peer.fair) console.log(`PyTorch peer not fair (${peer.peer.unfair_reason}): no torch ratios`);
for (const r of rows) {
  console.log(`${r.name.padEnd(20)} ${r.metric.padEnd(34)} ${r.native.toFixed(1).padStart(9)} ${(r.torch?.toFixed(1) ?? '-').padStart(10)} ${(r.torch_ratio?.toFixed(2) ?? '-').padStart(12)}`);
}
const jsonPath = opt('--json');
if (jsonPath) {
  mkdirSync(dirname(jsonPath), { recursive: true });
  const doc = { date: new Date().toISOString(), machine: machineInfo(), threads, quick, torch_peer: peer?.peer ?? null, peer_env_dropped: peerEnvDropped(), gemm_peer: peer?.gemm ?? null, rows };
  writeFileSync(`${jsonPath}.tmp`, JSON.stringify(doc, null, 2) + '\n');
  renameSync(`${jsonPath}.tmp`, jsonPath);
  log(`model.bench: wrote ${jsonPath}`);
}
