import { PolicyModel, presets } from './lib/model/index.js';
const s = { ...presets.small, dtype: 'float32' as const };
const m = await PolicyModel.random(s, { seed: 1 });
const rand = (n: number) => Array.from({ length: n }, (_, i) => (i * 7919 + 13) % s.vocabSize);
const prompts = Array.from({ length: 4 }, (_, k) => rand(32).map((x) => (x + 3 * k) % s.vocabSize));
const bf16 = process.argv[2] === 'bf16';
m.setBf16({ generate: bf16 });
await m.generate(prompts, { maxNewTokens: 4, temperature: 0 });
const reps = Number(process.argv[3] ?? 10);
const t0 = performance.now();
for (let r = 0; r < reps; r++) await m.generate(prompts, { maxNewTokens: 32, temperature: 0 });
const ms = (performance.now() - t0) / reps;
// prefill only
const t1 = performance.now();
for (let r = 0; r < reps; r++) await m.generate(prompts, { maxNewTokens: 1, temperature: 0 });
const pms = (performance.now() - t1) / reps;
console.log(bf16 ? 'bf16' : 'fp32', 'call', ms.toFixed(1), 'ms', (128 / ms * 1000).toFixed(0), 'tok/s; prefill+1', pms.toFixed(1), 'ms; per decode step', ((ms - pms) / 31).toFixed(2), 'ms');
