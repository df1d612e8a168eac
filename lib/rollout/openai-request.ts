// Request bodies of `murphy-native serve`'s OpenAI-compatible endpoints, checked and turned
// into engine work: /v1/completions (prompt text or token ids) and /v1/chat/completions
// (messages rendered with the model's chat template exactly as the trainer renders them:
// ChatTokenizer.renderChat, then encode; enable_thinking defaults to the trainer's false). Every error is an HttpError naming the field.
import type { ChatMessage, RenderOptions } from '../prompt/tokenizer.js';
import type { EngineInfo, EngineRequest, TextCodec } from './types.js';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly type = status === 404 ? 'NotFoundError' : status === 401 ? 'AuthenticationError' : 'BadRequestError',
  ) {
    super(message);
  }
}

export const bad = (message: string, param: string | null = null) => new HttpError(400, message, param);

export type Json = Record<string, unknown>;

/** A tokenizer that can also render chat messages (lib/prompt's HfChatTokenizer). */
export interface ChatCodec extends TextCodec {
  renderChat(messages: readonly ChatMessage[], options: RenderOptions): string;
}

export const hasChat = (t: TextCodec | undefined): t is ChatCodec => typeof (t as Partial<ChatCodec> | undefined)?.renderChat === 'function';

/** Most alternatives per token (vLLM's default max_logprobs and OpenAI's top_logprobs limit). */
export const MAX_TOP_LOGPROBS = 20;

/** What a request asks for, checked and resolved. */
export interface GenPlan {
  kind: 'completion' | 'chat';
  prompts: number[][];
  n: number;
  /** Sampling for every prompt (maxTokens filled per prompt by budget()). */
  req: Omit<EngineRequest, 'promptIds'>;
  maxTokensGiven: number | undefined;
  stop: string[];
  /** Alternatives per token; null = no logprobs at all. */
  logprobs: number | null;
  returnTokenIds: boolean;
  stream: boolean;
  includeUsage: boolean;
}

export interface PlanContext {
  info: EngineInfo;
  modelName: string;
  tokenizer: TextCodec | undefined;
  /** Ids that always end a completion unless ignore_eos. */
  eos: readonly number[];
  maxN: number;
  /** Largest work of one request, in tokens: prompt tokens + n x max_tokens, summed over its prompts. */
  maxRequestTokens: number;
}

const isInt = (x: unknown): x is number => typeof x === 'number' && Number.isSafeInteger(x);

function optInt(b: Json, k: string, def: number | undefined, lo: number, hi: number): number | undefined {
  const v = b[k];
  if (v === undefined || v === null) return def;
  if (!isInt(v) || v < lo || v > hi) throw bad(`'${k}' must be an integer in [${lo}, ${hi}], got ${JSON.stringify(v)}`, k);
  return v;
}

function optNum(b: Json, k: string, def: number, ok: (x: number) => boolean, what: string): number {
  const v = b[k];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'number' || !Number.isFinite(v) || !ok(v)) throw bad(`'${k}' must be ${what}, got ${JSON.stringify(v)}`, k);
  return v;
}

function optBool(b: Json, k: string, def: boolean): boolean {
  const v = b[k];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'boolean') throw bad(`'${k}' must be a boolean`, k);
  return v;
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** Fields vLLM accepts that this server does not implement: rejected unless at their neutral value. */
const UNSUPPORTED: [string, unknown][] = [
  ['presence_penalty', 0], ['frequency_penalty', 0], ['repetition_penalty', 1], ['best_of', 1],
  ['echo', false], ['suffix', null], ['logit_bias', null], ['min_tokens', 0],
  ['prompt_logprobs', null], ['guided_json', null], ['guided_regex', null], ['guided_choice', null], ['guided_grammar', null],
  ['structured_outputs', null], ['include_stop_str_in_output', false], ['skip_special_tokens', true], ['use_beam_search', false],
];
const CHAT_UNSUPPORTED: [string, unknown][] = [
  ['tools', null], ['tool_choice', 'none'], ['functions', null], ['function_call', 'none'], ['response_format', { type: 'text' }],
  ['prediction', null], ['audio', null], ['modalities', ['text']], ['chat_template', null], ['documents', null],
  ['reasoning_effort', null], ['mm_processor_kwargs', null],
];

function checkUnsupported(b: Json, list: [string, unknown][]): void {
  for (const [k, neutral] of list) {
    const v = b[k];
    if (v !== undefined && v !== null && !same(v, neutral)) throw bad(`'${k}' is not supported by murphy-native serve`, k);
  }
}

function tokensOf(x: unknown[], where: string, info: EngineInfo): number[] {
  if (x.length === 0) throw bad(`${where} is empty`, 'prompt');
  for (const t of x) {
    if (!isInt(t) || t < 0 || t >= info.vocabSize) throw bad(`${where}: token id ${JSON.stringify(t)} is outside the vocabulary [0, ${info.vocabSize})`, 'prompt');
  }
  return x as number[];
}

function completionPrompts(b: Json, c: PlanContext): number[][] {
  const text = (s: string): number[] => {
    if (c.tokenizer === undefined) throw bad('this server has no tokenizer: send prompts as token ids', 'prompt');
    const ids = c.tokenizer.encode(s);
    if (ids.length === 0) throw bad('the prompt is empty', 'prompt');
    return ids;
  };
  const p = b.prompt;
  let prompts: number[][];
  if (typeof p === 'string') prompts = [text(p)];
  else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'number')) prompts = [tokensOf(p, 'prompt', c.info)];
  else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'string')) prompts = (p as string[]).map(text);
  else if (Array.isArray(p) && p.length > 0 && p.every((x) => Array.isArray(x))) prompts = (p as unknown[][]).map((x, i) => tokensOf(x, `prompt[${i}]`, c.info));
  else throw bad("'prompt' must be a string, a list of strings, a list of token ids or a list of lists of token ids", 'prompt');
  if (prompts.length > 1024) throw bad('at most 1024 prompts per request', 'prompt');
  return prompts;
}

function messageText(m: Json, i: number): string {
  const c = m.content;
  if (typeof c === 'string') return c;
  if ((c === null || c === undefined) && m.role === 'assistant') return '';
  if (Array.isArray(c)) {
    return c.map((part, j) => {
      const p = part as Json;
      if (p === null || typeof p !== 'object' || p.type !== 'text' || typeof p.text !== 'string') {
        throw bad(`messages[${i}].content[${j}]: only {"type": "text", "text": ...} parts are supported`, 'messages');
      }
      return p.text;
    }).join('');
  }
  throw bad(`messages[${i}].content must be a string or a list of text parts`, 'messages');
}

/** The messages of a chat request, as the chat template takes them. */
export function chatMessages(b: Json): ChatMessage[] {
  const ms = b.messages;
  if (!Array.isArray(ms) || ms.length === 0) throw bad("'messages' must be a non-empty list of {role, content}", 'messages');
  return ms.map((m: unknown, i) => {
    if (m === null || typeof m !== 'object' || Array.isArray(m)) throw bad(`messages[${i}] must be an object {role, content}`, 'messages');
    const o = m as Json;
    if (typeof o.role !== 'string' || o.role === '') throw bad(`messages[${i}].role must be a string`, 'messages');
    if (Array.isArray(o.tool_calls) && o.tool_calls.length > 0) throw bad(`messages[${i}].tool_calls: tool calls are not supported by murphy-native serve`, 'messages');
    return { role: o.role, content: messageText(o, i) };
  });
}

/**
 * Token ids of a chat request's prompt: the template rendered as the trainer renders it
 * (ChatPromptBuilder: renderChat, then encode). continue_final_message leaves the last
 * (assistant) message open: the text is cut right after its content, as vLLM does.
 */
export function chatPromptIds(b: Json, tok: ChatCodec): number[] {
  const messages = chatMessages(b);
  const continueFinal = optBool(b, 'continue_final_message', false);
  const addGen = optBool(b, 'add_generation_prompt', !continueFinal);
  if (continueFinal && addGen) throw bad("'continue_final_message' and 'add_generation_prompt' cannot both be true", 'continue_final_message');
  const kw = b.chat_template_kwargs;
  if (kw !== undefined && kw !== null && (typeof kw !== 'object' || Array.isArray(kw))) throw bad("'chat_template_kwargs' must be an object", 'chat_template_kwargs');
  const vars = (kw ?? {}) as Json;
  // the trainer's default (ChatPromptBuilder, thinking: false) unless the request says otherwise
  const enableThinking = vars.enable_thinking ?? false;
  if (typeof enableThinking !== 'boolean') throw bad("'chat_template_kwargs.enable_thinking' must be a boolean", 'chat_template_kwargs');
  let text: string;
  try {
    text = tok.renderChat(messages, { addGenerationPrompt: addGen, enableThinking, vars });
  } catch (e) {
    throw bad(`the chat template failed on these messages: ${(e as Error).message}`, 'messages');
  }
  if (continueFinal) {
    const last = messages[messages.length - 1];
    if (last.role !== 'assistant') throw bad("'continue_final_message' needs the last message to be the assistant's", 'continue_final_message');
    let at = last.content === '' ? -1 : text.lastIndexOf(last.content);
    let len = last.content.length;
    if (at < 0 && last.content.trim() !== '') {
      at = text.lastIndexOf(last.content.trim());
      len = last.content.trim().length;
    }
    if (at < 0) throw bad("'continue_final_message': the chat template does not reproduce the final message's content", 'continue_final_message');
    text = text.slice(0, at + len);
  }
  const ids = tok.encode(text);
  if (ids.length === 0) throw bad('the rendered chat prompt is empty', 'messages');
  return ids;
}

/** Checks a /v1/completions or /v1/chat/completions body and resolves what to generate. */
export function planRequest(kind: 'completion' | 'chat', b: Json, c: PlanContext): GenPlan {
  if (b.model !== undefined && b.model !== null && b.model !== c.modelName) {
    throw new HttpError(404, `The model \`${String(b.model)}\` does not exist.`, 'model');
  }
  checkUnsupported(b, UNSUPPORTED);
  let prompts: number[][];
  if (kind === 'chat') {
    checkUnsupported(b, CHAT_UNSUPPORTED);
    if (b.prompt !== undefined) throw bad("'prompt' belongs to /v1/completions; chat requests send 'messages'", 'prompt');
    if (!hasChat(c.tokenizer)) throw bad('this server has no tokenizer with a chat template: use /v1/completions with token ids', 'messages');
    prompts = [chatPromptIds(b, c.tokenizer)];
  } else {
    for (const k of ['messages', 'add_generation_prompt', 'continue_final_message', 'chat_template_kwargs']) {
      if (b[k] !== undefined) throw bad(`'${k}' belongs to /v1/chat/completions`, k);
    }
    prompts = completionPrompts(b, c);
  }
  const info = c.info;
  const n = optInt(b, 'n', 1, 1, c.maxN) as number;
  let maxTokensGiven = optInt(b, 'max_tokens', undefined, 1, 1 << 24);
  if (kind === 'chat') {
    const mct = optInt(b, 'max_completion_tokens', undefined, 1, 1 << 24);
    if (mct !== undefined && maxTokensGiven !== undefined && mct !== maxTokensGiven) {
      throw bad("'max_tokens' and 'max_completion_tokens' disagree; send one", 'max_completion_tokens');
    }
    maxTokensGiven = mct ?? maxTokensGiven;
  } else if (b.max_completion_tokens !== undefined) {
    throw bad("'max_completion_tokens' belongs to /v1/chat/completions; use 'max_tokens'", 'max_completion_tokens');
  }
  const temperature = optNum(b, 'temperature', 1, (x) => x >= 0, 'a number >= 0');
  const topP = optNum(b, 'top_p', 1, (x) => x > 0 && x <= 1, 'in (0, 1]');
  const topKRaw = optInt(b, 'top_k', 0, -1, 1 << 30) as number;
  const minP = optNum(b, 'min_p', 0, (x) => x >= 0 && x <= 1, 'in [0, 1]');
  const seed = optInt(b, 'seed', undefined, 0, Number.MAX_SAFE_INTEGER);
  let stop: string[] = [];
  if (typeof b.stop === 'string') stop = [b.stop];
  else if (Array.isArray(b.stop) && b.stop.every((s) => typeof s === 'string')) stop = b.stop as string[];
  else if (b.stop !== undefined && b.stop !== null) throw bad("'stop' must be a string or a list of strings", 'stop');
  stop = stop.filter((s) => s !== '');
  if (stop.length > 0 && c.tokenizer === undefined) throw bad('this server has no tokenizer: stop strings are not available', 'stop');
  let stopIds: number[] = [];
  if (Array.isArray(b.stop_token_ids)) {
    for (const t of b.stop_token_ids) if (!isInt(t) || t < 0 || t >= info.vocabSize) throw bad(`'stop_token_ids': ${JSON.stringify(t)} is not a token id`, 'stop_token_ids');
    stopIds = b.stop_token_ids as number[];
  } else if (b.stop_token_ids !== undefined && b.stop_token_ids !== null) throw bad("'stop_token_ids' must be a list of token ids", 'stop_token_ids');
  const ignoreEos = optBool(b, 'ignore_eos', false);

  let logprobs: number | null;
  if (kind === 'chat') {
    const want = optBool(b, 'logprobs', false);
    const top = optInt(b, 'top_logprobs', undefined, 0, MAX_TOP_LOGPROBS);
    if (top !== undefined && top > 0 && !want) throw bad("'top_logprobs' needs 'logprobs': true", 'top_logprobs');
    logprobs = want ? (top ?? 0) : null;
  } else {
    const lp = b.logprobs;
    if (lp !== undefined && lp !== null && (!isInt(lp) || lp < 0 || lp > MAX_TOP_LOGPROBS)) {
      throw bad(`'logprobs' must be an integer in [0, ${MAX_TOP_LOGPROBS}] (the number of alternatives per token)`, 'logprobs');
    }
    logprobs = isInt(lp) ? lp : null;
  }
  const returnTokenIds = optBool(b, 'return_token_ids', false);
  const stream = optBool(b, 'stream', false);
  let includeUsage = false;
  const so = b.stream_options;
  if (so !== undefined && so !== null) {
    if (!stream) throw bad("'stream_options' is only allowed with 'stream': true", 'stream_options');
    if (typeof so !== 'object' || Array.isArray(so)) throw bad("'stream_options' must be an object", 'stream_options');
    const o = so as Json;
    for (const k of Object.keys(o)) if (k !== 'include_usage') throw bad(`'stream_options.${k}' is not supported by murphy-native serve`, 'stream_options');
    includeUsage = optBool(o, 'include_usage', false);
  }

  const maxLen = info.maxModelLen;
  let work = 0;
  for (const pr of prompts) {
    const want = pr.length + (maxTokensGiven ?? 1);
    if (want > maxLen) {
      throw bad(`This model's maximum context length is ${maxLen} tokens. However, you requested ${want} tokens (${pr.length} in the messages, ${maxTokensGiven ?? 1} in the completion). Please reduce the length of the messages or completion.`, maxTokensGiven === undefined ? 'prompt' : kind === 'chat' && b.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens');
    }
    work += pr.length + n * (maxTokensGiven ?? maxLen - pr.length);
  }
  if (work > c.maxRequestTokens) {
    throw bad(`this request is ${work} tokens of work (prompt tokens + n x max_tokens, over its prompts); this server takes at most ${c.maxRequestTokens} per request: lower n or max_tokens, or split the request`, maxTokensGiven === undefined ? 'max_tokens' : 'n');
  }
  const allStop = [...new Set([...stopIds, ...(ignoreEos ? [] : c.eos)])].sort((x, y) => x - y);
  return {
    kind, prompts, n, stop, logprobs, returnTokenIds, maxTokensGiven, stream, includeUsage,
    req: { n, maxTokens: maxTokensGiven ?? 0, temperature, topP, topK: topKRaw <= 0 ? 0 : topKRaw, minP, seed, stopTokenIds: allStop, ignoreEos, topLogprobs: logprobs ?? 0 },
  };
}

/** The engine request for prompt p of a plan: vLLM's default budget is whatever the context leaves. */
export function engineRequest(plan: GenPlan, p: number, maxModelLen: number, signal?: AbortSignal): EngineRequest {
  const promptIds = plan.prompts[p];
  return { ...plan.req, promptIds, maxTokens: plan.maxTokensGiven ?? maxModelLen - promptIds.length, signal };
}
