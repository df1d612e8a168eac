// Multi-turn prompt assembly at the token level (docs/method.md §7).
//
// The turn-(t+1) prompt is built as: previous prompt ids + the completion's ids exactly as
// sampled + the ids of the rendered feedback turn. Sampled text is never re-tokenized.

import type { FollowUpContext, PromptBuilder, RolloutTree } from '../murphy/types.js';
import type { ChatMessage, ChatTokenizer } from './tokenizer.js';

/** 'full': every earlier attempt and its feedback stays in the prompt; 'latest': task + latest attempt + its feedback. */
export type HistoryMode = 'full' | 'latest';

export interface ChatPromptOptions<P> {
  /** The turn-1 user message for a problem. */
  task: (problem: P) => string;
  /** Optional system message. */
  system?: string;
  /** Default 'full'. */
  history?: HistoryMode;
  /** Qwen3 thinking mode (enable_thinking). Default false. */
  thinking?: boolean;
  /** The user message carrying the executor's feedback. Default: defaultFeedbackMessage. */
  feedbackMessage?: (feedback: string) => string;
  /** Extra chat-template variables. */
  templateVars?: Record<string, unknown>;
}

/** Default feedback turn: the executor's text and an instruction to fix the code. */
export function defaultFeedbackMessage(feedback: string): string {
  return (
    'Your code did not pass the tests. Here is the feedback from running it:\n\n' +
    feedback.trimEnd() +
    '\n\nPlease fix the code. Give the complete corrected solution in a single ```python code block.'
  );
}

const ATTEMPT_SENTINEL = '\u2063MURPHY_ATTEMPT_SENTINEL\u2063';

/**
 * PromptBuilder over a real chat template. initial() renders [system?, user: task] with the
 * generation prompt and tokenizes it; followUp() appends the sampled completion ids and the
 * ids of the template text that follows an assistant message up to the next generation prompt
 * (closing the assistant turn when the completion did not end with the end-of-turn token).
 */
export class ChatPromptBuilder<P> implements PromptBuilder<P> {
  readonly history: HistoryMode;
  readonly thinking: boolean;
  private readonly feedbackMessage: (feedback: string) => string;

  constructor(
    readonly tokenizer: ChatTokenizer,
    private readonly options: ChatPromptOptions<P>,
  ) {
    this.history = options.history ?? 'full';
    this.thinking = options.thinking ?? false;
    this.feedbackMessage = options.feedbackMessage ?? defaultFeedbackMessage;
    if (this.history !== 'full' && this.history !== 'latest') throw new Error(`history must be 'full' or 'latest', got ${String(this.history)}`);
  }

  /** The turn-1 messages of a problem. */
  taskMessages(problem: P): ChatMessage[] {
    const msgs: ChatMessage[] = [];
    if (this.options.system !== undefined) msgs.push({ role: 'system', content: this.options.system });
    msgs.push({ role: 'user', content: this.options.task(problem) });
    return msgs;
  }

  /** Renders messages with the generation prompt in this builder's thinking mode. */
  render(messages: readonly ChatMessage[], addGenerationPrompt = true): string {
    return this.tokenizer.renderChat(messages, { addGenerationPrompt, enableThinking: this.thinking, vars: this.options.templateVars });
  }

  initial(problem: P): number[] {
    return this.tokenizer.encode(this.render(this.taskMessages(problem)));
  }

  /**
   * Template text between the end of an assistant message's content and the next
   * generation prompt's end, with a user message carrying `feedback` in between.
   */
  feedbackTurnText(feedback: string): string {
    const text = this.render([
      { role: 'user', content: 'task' },
      { role: 'assistant', content: ATTEMPT_SENTINEL },
      { role: 'user', content: this.feedbackMessage(feedback) },
    ]);
    const at = text.indexOf(ATTEMPT_SENTINEL);
    if (at < 0) throw new Error('chat template dropped the assistant message; cannot build follow-up prompts');
    return text.slice(at + ATTEMPT_SENTINEL.length);
  }

  /**
   * Ids appended after a completion: the feedback turn. When the completion already ends
   * with a special token that the template text starts with (e.g. <|im_end|>), that part
   * is not repeated.
   */
  feedbackTurnIds(completionIds: readonly number[], feedback: string): number[] {
    let text = this.feedbackTurnText(feedback);
    const last = completionIds[completionIds.length - 1];
    if (last !== undefined && this.tokenizer.isSpecial(last)) {
      const lastText = this.tokenizer.decode([last]);
      if (lastText !== '' && text.startsWith(lastText)) text = text.slice(lastText.length);
    }
    return this.tokenizer.encode(text);
  }

  followUp(ctx: FollowUpContext<P>): number[] {
    const base = this.history === 'full' ? ctx.promptIds : ctx.tree.groups[0]!.promptIds;
    const delta = this.feedbackTurnIds(ctx.node.completionIds, ctx.feedback);
    const out = new Array<number>(base.length + ctx.node.completionIds.length + delta.length);
    let k = 0;
    for (const x of base) out[k++] = x;
    for (const x of ctx.node.completionIds) out[k++] = x;
    for (const x of delta) out[k++] = x;
    return out;
  }

  /**
   * The chat messages behind a node's prompt plus (optionally) its own completion: for logs,
   * the report, and for checking ids against a full render. Completion text is taken as
   * sampled (the model's own text, thinking included).
   */
  conversation(tree: RolloutTree<P>, nodeId: number, includeCompletion = true): ChatMessage[] {
    const path: number[] = [];
    for (let cur: number | null = nodeId; cur !== null; cur = tree.nodes[cur]!.parent) path.push(cur);
    path.reverse();
    const msgs = this.taskMessages(tree.problem);
    const attempts = this.history === 'full' ? path : path.slice(-2);
    for (let i = 0; i < attempts.length; i++) {
      const n = tree.nodes[attempts[i]!]!;
      const isSelf = i === attempts.length - 1;
      if (isSelf && !includeCompletion) break;
      msgs.push({ role: 'assistant', content: n.text });
      if (!isSelf) msgs.push({ role: 'user', content: this.feedbackMessage(n.feedback) });
    }
    return msgs;
  }
}
