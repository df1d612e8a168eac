// Types shared by the MURPHY core (see docs/method.md).
//
// The core knows nothing of models, HTTP or Python: a Sampler produces completions from
// prompt token ids, an Executor runs extracted code and returns a reward with feedback, and
// a PromptBuilder turns a problem (opaque to the core) and a failed attempt into token ids.

/** Sampling parameters forwarded verbatim to the Sampler. */
export interface SampleParams {
  temperature?: number;
  topP?: number;
  topK?: number;
  /** Min-p (0 = off): keep tokens with probability >= minP x the most likely one's. */
  minP?: number;
  /** Upper bound on completion tokens. */
  maxTokens?: number;
  /** Stop strings (the backend's EOS always stops). */
  stop?: string[];
  /**
   * Per-request seed. When the builder is given a seed it derives one per group
   * (from the seed, the problem's index and the group's id), so a seeded backend is
   * reproducible whatever the order requests complete in.
   */
  seed?: number;
  /**
   * false: the caller reads no log-probs (evaluations); a backend may then leave
   * Completion.logprobs undefined and skip their cost (the embedded engine's greedy draws do).
   * Default true.
   */
  logprobs?: boolean;
}

/** Why the backend stopped: 'stop' (EOS or stop string), 'length' (maxTokens) or backend-specific. */
export type FinishReason = 'stop' | 'length' | (string & {});

/** One sampled completion, exactly as the backend produced it. */
export interface Completion {
  /** Sampled token ids, including the end-of-turn token when the backend emitted it. */
  tokenIds: number[];
  /** Log-probability of each sampled token under the rollout policy (same length as tokenIds), when available. */
  logprobs?: number[];
  /** Decoded text (for code extraction and logs; never re-tokenized). */
  text: string;
  finishReason: FinishReason;
  /**
   * What ended a 'stop' completion, as vLLM reports it: the stop token id or stop string,
   * null for EOS (or when the backend does not say).
   */
  stopReason?: number | string | null;
  /**
   * The prompt left no room in the backend's context (max_model_len): no tokens were
   * sampled and no request was made (finishReason 'length'). The tree builder makes such a
   * completion a leaf that is neither executed nor trained on.
   */
  noRoom?: boolean;
}

/** Produces n completions of one prompt. */
export interface Sampler {
  generate(promptIds: number[], n: number, params: SampleParams): Promise<Completion[]>;
}

/** Outcome of one test case, optional detail of an ExecResult. */
export interface TestOutcome {
  name?: string;
  passed: boolean;
  /** Error message, expected vs actual, etc. */
  message?: string;
}

/** Result of executing one extracted program. */
export interface ExecResult {
  /** Fraction of tests passed, in [0, 1]. */
  reward: number;
  /** True when every test passed. */
  passed: boolean;
  /** Text shown to the model in the next turn (errors, failing asserts, ...). */
  feedback: string;
  /** Optional per-test details. */
  tests?: TestOutcome[];
}

/**
 * Runs code against a problem's tests. `P` is the problem type, opaque to the tree: the
 * builder passes the problem it was given through unchanged.
 */
export interface Executor<P = unknown> {
  execute(problem: P, code: string): Promise<ExecResult>;
}

/** What a PromptBuilder gets to build a follow-up (turn t+1) prompt. */
export interface FollowUpContext<P = unknown> {
  problem: P;
  tree: RolloutTree<P>;
  /** The failed node being expanded (turn t). */
  node: TreeNode;
  /** Prompt token ids that produced `node` (its group's prompt). */
  promptIds: number[];
  /** The executor's feedback for `node`. */
  feedback: string;
}

/** Builds the token ids of prompts. Implemented over a real chat template by lib/prompt (ChatPromptBuilder). */
export interface PromptBuilder<P = unknown> {
  /** Turn-1 prompt ids for a problem. */
  initial(problem: P): number[] | Promise<number[]>;
  /**
   * Turn-(t+1) prompt ids: the conversation so far with the feedback appended as a user
   * message, ending with the generation prompt. Must reuse earlier ids exactly.
   */
  followUp(ctx: FollowUpContext<P>): number[] | Promise<number[]>;
}

/** Extracts code from a completion; null when there is none. */
export type CodeExtractor<P = unknown> = (completion: Completion, problem: P) => string | null;

/** One sampled completion in a rollout tree. */
export interface TreeNode {
  /** Index in tree.nodes. */
  id: number;
  /** Turn, 1-based. */
  turn: number;
  /** The node whose feedback produced this node's prompt; null at turn 1. */
  parent: number | null;
  /** Group (= prompt) this node was sampled from: the prompt reference. */
  group: number;
  /** Position within the group. */
  index: number;
  completionIds: number[];
  logprobs?: number[];
  text: string;
  finishReason: FinishReason;
  /** Extracted code, null when none was found. */
  code: string | null;
  /** Reward used by credit (fraction of tests, or 0/1 in binary mode). */
  reward: number;
  passed: boolean;
  feedback: string;
  tests?: TestOutcome[];
  /** Group expanded from this node (its children), null for a leaf. */
  childGroup: number | null;
  /** Propagated reward R(n) (MaRS or MeRS); NaN until credit is assigned. */
  credit: number;
  /** GRPO advantage; NaN until computed (0 for pruned nodes). */
  advantage: number;
  /** Removed from training by IntraP or InterP. */
  pruned: boolean;
  prunedBy?: 'intra' | 'inter';
  /**
   * The prompt left no room in the context (Completion.noRoom): a leaf with reward 0 and no
   * tokens, neither executed nor expanded, and never a training sample.
   */
  noRoom?: true;
}

/** Siblings sharing one prompt: one GRPO group. */
export interface Group {
  /** Index in tree.groups. */
  id: number;
  /** Turn of the group's completions. */
  turn: number;
  /** Expanded node this group answers; null for the turn-1 group. */
  parent: number | null;
  /** Full prompt token ids (shared by every member). */
  promptIds: number[];
  /** Member node ids, in sampling order. */
  nodes: number[];
  /** Whole group dropped by InterP. */
  pruned: boolean;
}

/** The rollout tree of one problem. */
export interface RolloutTree<P = unknown> {
  problemId: string;
  /** The problem as given to the builder (opaque; not serialized). */
  problem: P;
  /** S, the maximum number of turns this tree was built with. */
  maxTurns: number;
  groups: Group[];
  nodes: TreeNode[];
}

/** Error thrown on invalid configuration, inputs or trees. */
export class MurphyError extends Error {
  override name = 'MurphyError';
}
