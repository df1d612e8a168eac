// Rollout generation benchmark (issue 14): `node --import tsx bench/gpu-generate.bench.ts [--json FILE]
//   [--problems 8] [--group 8] [--repairs 4] [--prompt 512] [--completion 256] [--kv-gib 16]
//   [--block-size 16] [--token-budget 2048] [--max-running 256]`          (the host part)
// `node --import tsx bench/gpu-generate.bench.ts --device [--quick] [--dry-run] [--no-torch] [--json FILE]`
//                                                                          (the device part)
//
// The host part needs no GPU (it also runs in `npm run bench`): the MURPHY-shaped workload (G
// first attempts per problem, G' repairs of each from the whole conversation with a feedback
// turn of 200-400 tokens) through the paged-KV scheduler, executed by the reference model
// (lib/rollout/paged/reference-model.ts), with and without prefix sharing. Reported: prefill
// tokens computed, prefill tokens saved, decode tokens, preemptions, and the fraction of
// prefill tokens sharing removes (goal >= 70%); twice: with a pool that holds the whole
// workload (no preemption: what the workload itself asks for) and with the pool a Qwen3-0.6B
// bf16 KV cache gets in --kv-gib GiB (preemptions recompute, which adds prefill). Token counts
// are exact for the scheduler's decisions; they do not depend on the machine. Also timed (on
// this machine, median over the run's steps): the host's work per step that a device step would
// wait for, schedule() + planArrays() + complete().
//
// The device part (--device; in `npm run bench:gpu` and `gpu:check`) runs the paged step of the
// device engine (PolicyModel.pagedStep through the scheduler and lib/rollout/paged's
// DeviceExecutor, the loop PagedEngine runs) on random-weight models, bf16 storage:
//  - the device's copy bandwidth (copyBuffer, bench/device-copy.ts), measured first in the run;
//  - decode tokens/s for Qwen3-0.6B and Qwen3-1.7B shapes at batch 1, 32 and 256, each sequence
//    a distinct random 1,024-token prompt, greedy, no stop token: decode tokens over the wall
//    time of N - 1 = 127 steps in which all B sequences decode (schedule + device step +
//    complete; the prefill steps are timed apart), and the device step's share. Prompts prefill
//    in chunks of the 2,048-token budget while the first admitted sequences already decode, so
//    contexts in the timed steps run from 1,025 up to 1,152 (B = 1) / 1,168 (32) / 1,288 (256);
//    then the requests are aborted;
//  - the bandwidth bound of each (bench/generate-bound.ts: weight + KV bytes of those steps over
//    the copy bandwidth) and the fraction reached (goal >= 60% at batch 1);
//  - HF transformers generate (bench/torch_gpu_generate.py, bf16, sdpa) at batch 32 on the same
//    shape, prompt and new tokens: torch_ratio = our decode tokens/s / HF's (goal >= 5x); null
//    with the reason when python3 lacks torch / transformers (or --no-torch);
//  - the MURPHY tree workload (G = 8, G' = 4, 512-token prompts, 8 problems, 256-token
//    completions, sampled at temperature 1) on the Qwen3-0.6B shape with and without prefix
//    sharing, pool of --kv-gib GiB: generated tokens/s, prefill tokens computed and saved
//    (goal: sharing cuts prefill by >= 70%).
// --quick (scripts/gpu-check.sh, to stay in its 8-minute budget) cuts: batch 256, the decode
// runs to 32 new tokens, the tree workload to 2 problems of 64-token completions. --dry-run runs
// the same code with the engine emulated on the CPU (device 'emulate') at a tiny shape (vocab
// 512, 2 layers; prompts of 32, 8 new tokens, batch 1 and 4; the tree workload 1 problem of
// 32-token prompts): it checks the script, not a GPU, and its figures say nothing about one.
// Without a usable CUDA device (and no --dry-run) the device part prints why and exits 0.
// The JSON file is rewritten after each section, so a run cut short keeps what it measured.
// Figures are only ever what this run measured; a goal with nothing measured reads null.
import '../test/gpu/binary.js'; // first: selects the CUDA build when there is one (the device part)
import { cliArgs, machineInfo, writeJsonAtomic } from './common.js';
import {
  KvPool, ReferenceModel, Scheduler, TreeWorkload, kvBlockBytes, planArrays, runTreeWorkload, type SchedulerMetrics, type StepExecutor,
} from '../lib/rollout/paged/index.js';

const { flag, opt } = cliArgs();

if (flag('--device')) {
  const { deviceBench } = await import('./gpu-generate-device.js');
  await deviceBench({ dryRun: flag('--dry-run'), quick: flag('--quick'), torch: !flag('--no-torch'), jsonPath: opt('--json'), kvGib: opt('--kv-gib') });
} else {
  await hostPart();
}

/** The host part: the tree workload's token accounting through the scheduler and the reference model. */
async function hostPart(): Promise<void> {
  const num = (name: string, d: number) => {
    const v = opt(name);
    const x = v === undefined ? d : Number(v);
    if (!Number.isFinite(x) || x <= 0) throw new Error(`${name} must be a positive number, got ${v}`);
    return x;
  };
  const workload = new TreeWorkload({
    problems: num('--problems', 8), groupSize: num('--group', 8), repairs: num('--repairs', 4),
    promptTokens: num('--prompt', 512), completionTokens: num('--completion', 256),
  });
  const blockSize = num('--block-size', 16);
  const tokenBudget = num('--token-budget', 2048);
  const maxRunning = num('--max-running', 256);
  const kvGib = num('--kv-gib', 16);
  const QWEN3_06B = { numLayers: 28, numKvHeads: 8, headDim: 128, dtypeBytes: 2 };
  const MAX_MODEL_LEN = 40_960;

  interface Side {
    prefill_tokens: number;
    prefill_saved: number;
    /** Of prefill_saved: prefix-cache hits (the rest: the n samples of a prompt forked after computing it once). */
    cache_hit_tokens: number;
    decode_tokens: number;
    preemptions: number;
    cow_copies: number;
    steps: number;
    max_batch: number;
    /** Host time per step: schedule() + planArrays() + complete(), median and 99th percentile, microseconds. */
    host_us_median: number;
    host_us_p99: number;
  }

  function quantile(xs: number[], q: number): number {
    const a = [...xs].sort((x, y) => x - y);
    return a[Math.min(a.length - 1, Math.floor(q * a.length))];
  }

  function side(m: SchedulerMetrics, hostMs: number[]): Side {
    return {
      prefill_tokens: m.prefillTokens, prefill_saved: m.prefillSaved, cache_hit_tokens: m.cacheHitTokens, decode_tokens: m.decodeTokens, preemptions: m.preemptions, cow_copies: m.copies,
      steps: m.steps, max_batch: m.maxBatch, host_us_median: Math.round(1000 * quantile(hostMs, 0.5)), host_us_p99: Math.round(1000 * quantile(hostMs, 0.99)),
    };
  }

  /** Wraps a scheduler so that its schedule() and complete() calls, and planArrays of each plan, are timed. */
  function timed(s: Scheduler, hostMs: number[]): void {
    const schedule = s.schedule.bind(s), complete = s.complete.bind(s);
    let t = 0;
    s.schedule = () => {
      const t0 = performance.now();
      const plan = schedule();
      planArrays(plan);
      t = performance.now() - t0;
      return plan;
    };
    s.complete = (plan, sampled) => {
      const t0 = performance.now();
      const r = complete(plan, sampled);
      hostMs.push(t + performance.now() - t0);
      return r;
    };
  }

  async function run(blocks: number, prefixSharing: boolean): Promise<{ m: Side; samples: number[][] }> {
    const pool = new KvPool({ blocks, blockSize });
    const s = new Scheduler(pool, { maxModelLen: MAX_MODEL_LEN, tokenBudget, maxRunning, prefixSharing });
    const hostMs: number[] = [];
    timed(s, hostMs);
    const exec: StepExecutor = new ReferenceModel(blockSize, { vocab: workload.o.vocab });
    const r = await runTreeWorkload(workload, s, exec);
    return { m: side(r.metrics, hostMs), samples: [...r.first.samples, ...r.repair.samples].flat().map((x) => x.tokenIds) };
  }

  const o = workload.o;
  // every sequence's whole context at once, and a little slack: nothing is ever preempted
  const roomy = Math.ceil((o.problems * o.groupSize * (1 + o.repairs) * (o.promptTokens + 2 * o.completionTokens + o.feedbackTokens[1])) / blockSize) + 16;
  const budgetBlocks = Math.floor((kvGib * 2 ** 30) / kvBlockBytes(QWEN3_06B, blockSize));
  const pools = [
    { pool: 'whole workload', blocks: roomy },
    { pool: `Qwen3-0.6B bf16, ${kvGib} GiB`, blocks: budgetBlocks },
  ];

  const rows = [];
  for (const p of pools) {
    const shared = await run(p.blocks, true);
    const plain = await run(p.blocks, false);
    if (JSON.stringify(shared.samples) !== JSON.stringify(plain.samples)) throw new Error(`${p.pool}: samples differ with and without sharing`);
    rows.push({ ...p, block_size: blockSize, sharing: shared.m, no_sharing: plain.m, prefill_saved_fraction: 1 - shared.m.prefill_tokens / plain.m.prefill_tokens });
  }

  console.log(`MURPHY tree workload: ${o.problems} problems x G = ${o.groupSize} first attempts (prompt ${o.promptTokens}) + G' = ${o.repairs} repairs of each (feedback ${o.feedbackTokens[0]}-${o.feedbackTokens[1]} tokens), ${o.completionTokens}-token completions; block ${blockSize}, token budget ${tokenBudget}`);
  const head = ['pool', 'blocks', 'prefill (shared)', 'prefill (not)', 'saved', 'preemptions (shared / not)', 'host us/step median (p99), shared'];
  const lines = rows.map((r) => [r.pool, String(r.blocks), String(r.sharing.prefill_tokens), String(r.no_sharing.prefill_tokens), `${(100 * r.prefill_saved_fraction).toFixed(1)}%`,
    `${r.sharing.preemptions} / ${r.no_sharing.preemptions}`, `${r.sharing.host_us_median} (${r.sharing.host_us_p99})`]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  for (const l of [head, widths.map((w) => '-'.repeat(w)), ...lines]) console.log(l.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  '));
  console.log('goal: prefix sharing cuts the tree workload\'s prefill tokens by >= 70%. Device decode throughput: --device (npm run bench:gpu).');

  const jsonPath = opt('--json');
  if (jsonPath) {
    writeJsonAtomic(jsonPath, {
      date: new Date().toISOString(), machine: machineInfo(), executor: 'reference model (host; token counts only)',
      workload: { ...o, max_model_len: MAX_MODEL_LEN, token_budget: tokenBudget, max_running: maxRunning },
      prefix_sharing: rows, decode: null, decode_note: 'host part only: the device figures come from --device (npm run bench:gpu)',
    });
    console.error(`wrote ${jsonPath}`);
  }
}
