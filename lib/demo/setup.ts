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
import { RepairExecutor, repairExtract, repairProgram, repairSpecOf } from './repair.js';

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

export async function createDemoModel(seed: number, preset: 'tiny' | 'small' = 'tiny', engine: EngineOptions = {}): Promise<PolicyModel> {
  return PolicyModel.random(demoModelSizes(preset), { seed, initStd: 0.02, ...engine });
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
  /** Fraction of examples that are feedback turns. Default 0.5. */
  followUpFraction?: number;
  onStep?: (step: number, loss: number) => void;
}

/**
 * Supervised warm-up through the same native step (cross-entropy on completion tokens). It
 * teaches the answer format, not the use of feedback: half of the examples are turn-1
 * prompts answered with the right operator, the other half are feedback turns (a wrong first
 * attempt and the executor's feedback) answered with an operator drawn at random,
 * independent of the attempt and the feedback. Acting on feedback is left to RL.
 */
export async function supervisedWarmup(policy: Policy, problems: readonly Problem[], prompts: ChatPromptBuilder<Problem>, tok: HfChatTokenizer, o: SftOptions): Promise<number[]> {
  const eos = tok.eosTokenIds[0]!;
  const rng = mulberry32(mix32(o.seed, 0x5f7));
  const ex = new RepairExecutor();
  const losses: number[] = [];
  for (let step = 1; step <= o.steps; step++) {
    const samples: TrainingSample[] = [];
    for (let b = 0; b < o.batchSize; b++) {
      const p = problems[Math.floor(rng() * problems.length)]!;
      const spec = repairSpecOf(p);
      let promptIds = prompts.initial(p);
      let answer: string = spec.op;
      if (rng() < (o.followUpFraction ?? 0.5)) {
        const wrong = spec.op === '+' ? '*' : '+';
        const attempt = [...tok.encode(wrong), eos];
        const fb = ex.grade(p, repairProgram(spec.name, wrong, spec.k)).feedback;
        promptIds = [...promptIds, ...attempt, ...prompts.feedbackTurnIds(attempt, fb)];
        answer = rng() < 0.5 ? '+' : '*';
      }
      const completionIds = [...tok.encode(answer), eos];
      samples.push({ problemId: p.id, nodeId: 0, group: 0, groupId: p.id, turn: 1, promptIds, completionIds, advantage: 0, reward: 1, credit: 1 });
    }
    const mb = packSamples(samples);
    const st = await policy.accumulate(mb.batch, { crossEntropy: true }, 1);
    await policy.optimizerStep({ lr: o.lr, maxGradNorm: 1 });
    losses.push(st.loss);
    o.onStep?.(step, st.loss);
  }
  return losses;
}
