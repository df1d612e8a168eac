// `murphy-native init-model --out DIR`: a randomly initialised Qwen3 / OLMo-2 model saved as a
// Hugging Face directory (config.json, safetensors, tokenizer files) for tests, benchmarks and
// the demo. A preset gives the sizes; explicit flags override them.
import type { Argv, CommandModule } from 'yargs';
import type { ModelSizes, PresetName, WeightDType } from '../model/index.js';

interface InitModelArgs {
  out?: string;
  preset: PresetName;
  modelType?: 'qwen3' | 'olmo2';
  vocab?: number;
  hidden?: number;
  intermediate?: number;
  layers?: number;
  heads?: number;
  kvHeads?: number;
  headDim?: number;
  maxPositions?: number;
  tied?: boolean;
  dtype: WeightDType;
  seed: number;
  initStd: number;
  shardMb: number;
  tokenizer?: string;
}

export const initModelCommand: CommandModule<object, InitModelArgs> = {
  command: 'init-model',
  describe: 'Create a randomly initialised Qwen3 or OLMo-2 model as a Hugging Face directory',
  builder: (y) =>
    y
      .option('out', { type: 'string', describe: 'Output directory (replaced atomically) [required]' })
      .option('preset', { choices: ['tiny', 'small', 'qwen3-0.6b'] as const, default: 'tiny' as PresetName, describe: 'Size preset' })
      .option('model-type', { choices: ['qwen3', 'olmo2'] as const, describe: 'Architecture (default: the preset\'s, qwen3)' })
      .option('vocab', { type: 'number', describe: 'vocab_size' })
      .option('hidden', { type: 'number', describe: 'hidden_size' })
      .option('intermediate', { type: 'number', describe: 'intermediate_size' })
      .option('layers', { type: 'number', describe: 'num_hidden_layers' })
      .option('heads', { type: 'number', describe: 'num_attention_heads' })
      .option('kv-heads', { type: 'number', describe: 'num_key_value_heads' })
      .option('head-dim', { type: 'number', describe: 'head_dim' })
      .option('max-positions', { type: 'number', describe: 'max_position_embeddings' })
      .option('tied', { type: 'boolean', describe: 'tie_word_embeddings' })
      .option('dtype', { choices: ['bfloat16', 'float16', 'float32'] as const, default: 'bfloat16' as WeightDType, describe: 'Weight dtype on disk' })
      .option('seed', { type: 'number', default: 0, describe: 'Initialisation seed' })
      .option('init-std', { type: 'number', default: 0.02, describe: 'Standard deviation of the matrices (norm gains start at 1)' })
      .option('shard-mb', { type: 'number', default: 0, describe: 'Split the weights into shards of at most this many MB (0: one file)' })
      .option('tokenizer', { type: 'string', describe: 'Directory with tokenizer files to copy (default: a built-in byte-level tokenizer)' })
      .epilogue(
        'Context: the presets hold 2048 (tiny), 4096 (small) and 40960 (qwen3-0.6b) tokens. With the built-in byte-level ' +
          'tokenizer a token is a byte, and first-turn prompts of the shipped dataset loaders take up to 1,508 tokens (HumanEval), ' +
          '2,172 (MBPP), 590 (sanitized MBPP), 3,962 (KodCode) and 1,909 (LiveCodeBench); a feedback turn adds the completion and ' +
          'the feedback. For multi-turn training on these with a tiny or small model, pass --max-positions 8192.',
      ) as unknown as Argv<InitModelArgs>,
  handler: async (a) => {
    if (!a.out) {
      process.stderr.write('murphy-native init-model: --out DIR is required (the directory to write the model to)\n');
      process.exitCode = 2;
      return;
    }
    const sizes: Partial<ModelSizes> = {};
    if (a.modelType !== undefined) sizes.modelType = a.modelType;
    if (a.vocab !== undefined) sizes.vocabSize = a.vocab;
    if (a.hidden !== undefined) sizes.hiddenSize = a.hidden;
    if (a.intermediate !== undefined) sizes.intermediateSize = a.intermediate;
    if (a.layers !== undefined) sizes.numLayers = a.layers;
    if (a.heads !== undefined) sizes.numHeads = a.heads;
    if (a.kvHeads !== undefined) sizes.numKvHeads = a.kvHeads;
    if (a.headDim !== undefined) sizes.headDim = a.headDim;
    if (a.maxPositions !== undefined) sizes.maxPositionEmbeddings = a.maxPositions;
    if (a.tied !== undefined) sizes.tieWordEmbeddings = a.tied;
    const { initModel } = await import('../model/index.js');
    const r = await initModel({
      out: a.out, preset: a.preset, sizes, seed: a.seed, initStd: a.initStd, dtype: a.dtype,
      maxShardBytes: Math.round(a.shardMb * 1024 * 1024), tokenizerDir: a.tokenizer,
    });
    const i = r.info;
    process.stdout.write(
      `wrote ${r.dir}: ${i.modelType}, ${(r.params / 1e6).toFixed(2)}M parameters (vocab ${i.vocabSize}, hidden ${i.hiddenSize}, ` +
        `${i.numLayers} layers, ${i.numHeads}/${i.numKvHeads} heads of ${i.headDim}, ${i.tieWordEmbeddings ? 'tied' : 'untied'} head), ${i.dtype}\n`,
    );
  },
};
