// The CPU demo's parts: a tiny random Qwen3-shaped model with the built-in byte-level
// tokenizer, a compact chat prompt for the repair task, and the supervised warm-up.
import type { Problem } from '../data/types.js';
import { builtinTokenizerFiles, BUILTIN_VOCAB, PolicyModel, presets, type EngineOptions, type ModelSizes } from '../model/index.js';
import { mix32, mulberry32 } from '../murphy/rng.js';
import type { Completion } from '../murphy/types.js';
import { ChatPromptBuilder } from '../prompt/chat.js';
import { HfChatTokenizer } from '../prompt/tokenizer.js';
import { packSamples } from '../train/batching.js';
import type { Policy } from '../train/policy.js';
import type { TrainingSample } from '../murphy/flatten.js';
import { repairExtract, repairSpecOf } from './repair.js';

/** The built-in byte-level tokenizer (256 bytes + <|endoftext|>, <|im_start|>, <|im_end|>). */
export function builtinTokenizer(): HfChatTokenizer {
  const f = builtinTokenizerFiles();
  return new HfChatTokenizer(JSON.parse(f['tokenizer.json']!) as Record<string, unknown>, JSON.parse(f['tokenizer_config.json']!) as Record<string, unknown>);
}

/** Sizes of the demo model: the tiny preset with the built-in tokenizer's EOS. */
export function demoModelSizes(preset: 'tiny' | 'small' = 'tiny'): ModelSizes {
  const base = presets[preset];
  return { ...base, vocabSize: Math.max(base.vocabSize, BUILTIN_VOCAB), eosTokenId: 256 + 2, dtype: 'float32', maxPositionEmbeddings: 1024 };
}

/**
 * Standard deviation of the demo model's random matrices. The usual 0.02 is sized for hidden
 * sizes in the thousands; at the tiny preset's 64 it leaves the attention near uniform and the
 * residual stream near zero, and the circuit that copies the operator out of the feedback then
 * forms only after a long plateau (supervised, 32 feedback turns a step at lr 1e-2: not within
 * 100 steps at 0.02; within 20-50 at 0.1), which is what made the demo's transition late and
 * seed-dependent (docs/training.md, "The CPU demo").
 */
export const DEMO_INIT_STD = 0.1;

export async function createDemoModel(seed: number, preset: 'tiny' | 'small' = 'tiny', engine: EngineOptions = {}): Promise<PolicyModel> {
  return PolicyModel.random(demoModelSizes(preset), { seed, initStd: DEMO_INIT_STD, ...engine });
}

/** Chat prompts for the repair task: the task line as the user turn, feedback verbatim as the next user turn. */
export function repairPromptBuilder(tok: HfChatTokenizer, history: 'full' | 'latest' = 'full'): ChatPromptBuilder<Problem> {
  return new ChatPromptBuilder<Problem>(tok, { task: (p) => p.prompt, feedbackMessage: (f) => f, history });
}

/** The code extractor used with the demo (the whole completion). */
export function demoExtract(c: Completion, problem: Problem): string | null {
  return repairExtract(c.text, problem);
}

export interface SftOptions {
  steps: number;
  batchSize: number;
  lr: number;
  seed: number;
  onStep?: (step: number, loss: number) => void;
}

/** The warm-up's examples: turn-1 prompts of random training problems, each answered with its right operator. */
export function warmupSamples(problems: readonly Problem[], prompts: ChatPromptBuilder<Problem>, tok: HfChatTokenizer, n: number, rng: () => number): TrainingSample[] {
  const eos = tok.eosTokenIds[0]!;
  const samples: TrainingSample[] = [];
  for (let b = 0; b < n; b++) {
    const p = problems[Math.floor(rng() * problems.length)]!;
    const completionIds = [...tok.encode(repairSpecOf(p).op), eos];
    samples.push({ problemId: p.id, nodeId: 0, group: 0, groupId: p.id, turn: 1, promptIds: prompts.initial(p), completionIds, advantage: 0, reward: 1, credit: 1 });
  }
  return samples;
}

/**
 * Supervised warm-up through the same native step (cross-entropy on completion tokens). It
 * teaches the answer format (one operator, then the end of the turn) and nothing about
 * feedback: its examples are turn-1 prompts only, answered with the right operator, which the
 * task line does not determine (a coin flip over the problems that share a prompt). It has no
 * feedback turns: answered at random, as it did before, they taught the model that an answer
 * does not depend on its context, label noise that drowned the feedback signal RL has to
 * learn from (docs/training.md, "The CPU demo"). Acting on feedback is left to RL.
 */
export async function supervisedWarmup(policy: Policy, problems: readonly Problem[], prompts: ChatPromptBuilder<Problem>, tok: HfChatTokenizer, o: SftOptions): Promise<number[]> {
  const rng = mulberry32(mix32(o.seed, 0x5f7));
  const losses: number[] = [];
  for (let step = 1; step <= o.steps; step++) {
    const mb = packSamples(warmupSamples(problems, prompts, tok, o.batchSize, rng));
    const st = await policy.accumulate(mb.batch, { crossEntropy: true }, 1);
    await policy.optimizerStep({ lr: o.lr, maxGradNorm: 1 });
    losses.push(st.loss);
    o.onStep?.(step, st.loss);
  }
  return losses;
}
