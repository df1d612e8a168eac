// A built-in small tokenizer for random models: byte-level BPE with no merges (the 256 bytes
// in GPT-2's byte-to-unicode alphabet) plus Qwen-style special tokens, in Hugging Face's
// tokenizer.json format, so the saved directory loads in transformers and vLLM.

/** GPT-2's byte -> printable unicode map. */
function bytesToUnicode(): string[] {
  const bs: number[] = [];
  for (let i = 33; i <= 126; i++) bs.push(i);
  for (let i = 161; i <= 172; i++) bs.push(i);
  for (let i = 174; i <= 255; i++) bs.push(i);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const out = new Array<string>(256);
  bs.forEach((b, i) => { out[b] = String.fromCodePoint(cs[i]); });
  return out;
}

export const BUILTIN_SPECIALS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'] as const;
/** Vocabulary size the built-in tokenizer needs: 256 bytes + specials. */
export const BUILTIN_VOCAB = 256 + BUILTIN_SPECIALS.length;

/** The files of the built-in tokenizer: name -> contents. */
export function builtinTokenizerFiles(): Record<string, string> {
  const alphabet = bytesToUnicode();
  const vocab: Record<string, number> = {};
  alphabet.forEach((ch, i) => { vocab[ch] = i; });
  const added = BUILTIN_SPECIALS.map((content, i) => ({
    id: 256 + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  }));
  const tokenizer = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    post_processor: null,
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
      fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: [] },
  };
  const config = {
    tokenizer_class: 'PreTrainedTokenizerFast',
    eos_token: '<|im_end|>',
    pad_token: '<|endoftext|>',
    bos_token: null,
    model_max_length: 32768,
    // as Qwen3's: transformers' decode must not rewrite " ." to "." in code
    clean_up_tokenization_spaces: false,
    added_tokens_decoder: Object.fromEntries(added.map((a) => [String(a.id), { ...a, id: undefined }])),
    chat_template:
      "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
  };
  return {
    'tokenizer.json': JSON.stringify(tokenizer),
    'tokenizer_config.json': JSON.stringify(config, null, 2),
  };
}
