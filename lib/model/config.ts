// Hugging Face config.json for the two supported decoder families, and size presets.
// The native side parses and checks the same text (errors name the field).

export type ModelType = 'qwen3' | 'olmo2';
export type WeightDType = 'float32' | 'bfloat16' | 'float16';

/** The sizes a random model is built from. */
export interface ModelSizes {
  modelType: ModelType;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  maxPositionEmbeddings: number;
  tieWordEmbeddings: boolean;
  ropeTheta?: number;
  rmsNormEps?: number;
  dtype?: WeightDType;
  bosTokenId?: number;
  eosTokenId?: number;
}

export type PresetName = 'tiny' | 'small' | 'qwen3-0.6b';

/** tiny: tests and the CPU demo; small: benchmarks; qwen3-0.6b: Qwen3-0.6B's shape (28 layers). */
export const presets: Record<PresetName, ModelSizes> = {
  tiny: {
    modelType: 'qwen3', vocabSize: 512, hiddenSize: 64, intermediateSize: 192, numLayers: 2, numHeads: 4,
    numKvHeads: 2, headDim: 32, maxPositionEmbeddings: 2048, tieWordEmbeddings: true,
  },
  small: {
    modelType: 'qwen3', vocabSize: 32768, hiddenSize: 256, intermediateSize: 768, numLayers: 4, numHeads: 4,
    numKvHeads: 2, headDim: 64, maxPositionEmbeddings: 4096, tieWordEmbeddings: true,
  },
  'qwen3-0.6b': {
    modelType: 'qwen3', vocabSize: 151936, hiddenSize: 1024, intermediateSize: 3072, numLayers: 28, numHeads: 16,
    numKvHeads: 8, headDim: 128, maxPositionEmbeddings: 40960, tieWordEmbeddings: true, ropeTheta: 1000000,
  },
};

/** A config.json object that transformers and vLLM load (Qwen3ForCausalLM / Olmo2ForCausalLM). */
export function hfConfig(s: ModelSizes): Record<string, unknown> {
  const common = {
    vocab_size: s.vocabSize,
    hidden_size: s.hiddenSize,
    intermediate_size: s.intermediateSize,
    num_hidden_layers: s.numLayers,
    num_attention_heads: s.numHeads,
    num_key_value_heads: s.numKvHeads,
    max_position_embeddings: s.maxPositionEmbeddings,
    rms_norm_eps: s.rmsNormEps ?? 1e-6,
    rope_theta: s.ropeTheta ?? 10000,
    rope_scaling: null,
    hidden_act: 'silu',
    attention_bias: false,
    attention_dropout: 0.0,
    initializer_range: 0.02,
    tie_word_embeddings: s.tieWordEmbeddings,
    torch_dtype: s.dtype ?? 'bfloat16',
    use_cache: true,
    bos_token_id: s.bosTokenId ?? null,
    eos_token_id: s.eosTokenId ?? null,
  };
  if (s.modelType === 'qwen3') {
    return {
      architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', head_dim: s.headDim, ...common,
      use_sliding_window: false, sliding_window: null, max_window_layers: s.numLayers,
    };
  }
  if (s.headDim * s.numHeads !== s.hiddenSize) {
    // transformers' Olmo2 derives head_dim from hidden_size / heads; keep it explicit anyway
  }
  return { architectures: ['Olmo2ForCausalLM'], model_type: 'olmo2', head_dim: s.headDim, ...common, pad_token_id: null };
}
