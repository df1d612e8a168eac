// The one-layer model many tests write: the tiny preset cut to one layer, over the built-in
// tokenizer's vocabulary (every sampled id decodes), in float32 (weights round-trip exactly).
import { BUILTIN_VOCAB, initModel } from '../../lib/model/index.js';

/** Writes it to the folder `out` from `seed` (and initStd when given); returns the folder. */
export async function writeTinyModel(out: string, seed: number, initStd?: number): Promise<string> {
  const { dir } = await initModel({ out, preset: 'tiny', sizes: { vocabSize: BUILTIN_VOCAB, numLayers: 1 }, dtype: 'float32', seed, initStd });
  return dir;
}
