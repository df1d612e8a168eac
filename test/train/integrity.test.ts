// Checkpoint integrity (issue 10 item 1): the safetensors reader checks every offset, dtype,
// shape and count against the file and the model; checkpoints carry a manifest that resume
// verifies; resume falls back to the newest checkpoint that verifies and says so; corrupt
// JSON names its file; the native policy is not touched by a damaged file.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { resumeConfig, runTraining } from '../../lib/commands/run-training.js';
import { defaultConfig, type TrainConfig } from '../../lib/config/index.js';
import { createDemoModel } from '../../lib/demo/setup.js';
import { BUILTIN_VOCAB, PolicyModel, presets } from '../../lib/model/index.js';
import { FakeExecutor, FakePromptBuilder } from '../../lib/murphy/index.js';
import { decodeSafetensorsF32, encodeSafetensorsF32, readSafetensorsF32, safetensorsF32Chunks, tensorMismatch, type F32Tensors } from '../../lib/safetensors.js';
import { checkpointFault, findResumeCheckpoint, readTrainerState } from '../../lib/train/checkpoint.js';
import { train } from '../../lib/train/loop.js';
import { manifestFault } from '../../lib/train/manifest.js';
import { NativePolicy } from '../../lib/train/policy.js';
import { readMetrics, RunDir } from '../../lib/train/rundir.js';
import { Rng, testSeed } from '../helpers/random.js';
import { FAKE_PROBLEMS, fakeLoop } from './configs.js';
import { FakeBackend, FakePolicy } from './fakes.js';

const root = mkdtempSync(join(tmpdir(), 'murphy-integrity-'));
after(() => rmSync(root, { recursive: true, force: true }));
const rng = new Rng(testSeed('checkpoint integrity'));

function randomTensors(): F32Tensors {
  const out: F32Tensors = {};
  const n = 1 + Math.floor(rng.next() * 4);
  for (let i = 0; i < n; i++) {
    const shape = [1 + Math.floor(rng.next() * 5), 1 + Math.floor(rng.next() * 7)];
    out[`t${i}`] = { shape, data: Float32Array.from({ length: shape[0]! * shape[1]! }, () => rng.normal()) };
  }
  return out;
}

/** A file's header as JSON and its data section, for hand-made damage. */
function withHeader(buf: Buffer, edit: (h: Record<string, any>) => void): Buffer {
  const hlen = Number(buf.readBigUInt64LE(0));
  const h = JSON.parse(buf.subarray(8, 8 + hlen).toString('utf8')) as Record<string, any>;
  edit(h);
  const hb = Buffer.from(JSON.stringify(h));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(hb.length));
  return Buffer.concat([len, hb, buf.subarray(8 + hlen)]);
}

describe('safetensors reader', () => {
  it('round-trips random tensors', () => {
    const t = randomTensors();
    const back = decodeSafetensorsF32(encodeSafetensorsF32(t, { k: 'v' })).tensors;
    for (const [n, x] of Object.entries(t)) {
      assert.deepEqual(back[n]!.shape, x.shape);
      assert.deepEqual(back[n]!.data, x.data);
    }
  });

  it('rejects a truncated file, naming it, instead of reading zeros', () => {
    const buf = encodeSafetensorsF32(randomTensors());
    const cut = buf.subarray(0, buf.length - 1 - Math.floor(rng.next() * 4));
    assert.throws(() => decodeSafetensorsF32(cut, '/x/master.safetensors'), /\/x\/master\.safetensors: corrupt safetensors file: data of tensor .* lies outside .*truncated/);
    assert.throws(() => decodeSafetensorsF32(buf.subarray(0, 5), 'f'), /f: corrupt safetensors file: 5 bytes/);
    assert.throws(() => decodeSafetensorsF32(buf.subarray(0, 20), 'f'), /header length \d+ exceeds/);
  });

  it('rejects a wrong dtype, a count that does not match the shape, bad offsets, overlap and a broken header', () => {
    const buf = encodeSafetensorsF32({ a: { shape: [2, 2], data: new Float32Array(4) }, b: { shape: [3], data: new Float32Array(3) } });
    assert.throws(() => decodeSafetensorsF32(withHeader(buf, (h) => (h.a.dtype = 'BF16')), 'f'), /tensor 'a' has dtype "BF16", expected F32/);
    assert.throws(() => decodeSafetensorsF32(withHeader(buf, (h) => (h.a.shape = [2, 3])), 'f'), /tensor 'a' has 16 bytes for shape \[2, 3\]/);
    assert.throws(() => decodeSafetensorsF32(withHeader(buf, (h) => (h.b.data_offsets = [-4, 8])), 'f'), /data_offsets/);
    assert.throws(() => decodeSafetensorsF32(withHeader(buf, (h) => (h.b.data_offsets = [4, 16])), 'f'), /overlap/);
    const bad = Buffer.from(buf);
    bad.write('!', 8);
    assert.throws(() => decodeSafetensorsF32(bad, 'f'), /f: corrupt safetensors file: header is not valid JSON/);
  });

  it('readSafetensorsF32 (header first, then each tensor read into place) gives what decode gives, and the same faults', () => {
    const t = randomTensors();
    const buf = encodeSafetensorsF32(t, { k: 'v' });
    const p = join(root, 'streamed.safetensors');
    writeFileSync(p, Buffer.concat(safetensorsF32Chunks(t, { k: 'v' })));
    assert.deepEqual(readFileSync(p), buf);
    assert.deepEqual(readSafetensorsF32(p), decodeSafetensorsF32(buf));
    for (const cut of [5, 20, buf.length - 1 - rng.int(4)]) {
      writeFileSync(p, buf.subarray(0, cut));
      let want = '';
      assert.throws(() => decodeSafetensorsF32(buf.subarray(0, cut), p), (e: Error) => ((want = e.message), true));
      assert.throws(() => readSafetensorsF32(p), (e: Error) => e.message === want, `cut at ${cut}: ${want}`);
    }
    writeFileSync(p, withHeader(buf, (h) => (h[Object.keys(t)[0]!].dtype = 'BF16')));
    assert.throws(() => readSafetensorsF32(p), /streamed\.safetensors: corrupt safetensors file: tensor '.*' has dtype "BF16", expected F32/);
  });

  it('tensorMismatch names a missing, extra or misshapen tensor', () => {
    const t = { a: { shape: [2], data: new Float32Array(2) } };
    assert.equal(tensorMismatch(t, [{ name: 'a', shape: [2] }]), null);
    assert.match(tensorMismatch(t, [{ name: 'a', shape: [3] }])!, /'a' has shape \[2\], the model expects \[3\]/);
    assert.match(tensorMismatch(t, [{ name: 'b', shape: [2] }])!, /'b' is missing/);
    assert.match(tensorMismatch(t, [])!, /'a' is not a parameter/);
  });
});

describe('native policy state', () => {
  it('a truncated master.safetensors or optimizer.safetensors is an error naming the file, and the model is untouched', async () => {
    const model = await PolicyModel.random({ ...presets.tiny, vocabSize: BUILTIN_VOCAB, numLayers: 1 }, { seed: 3 });
    const policy = new NativePolicy(model);
    const dir = join(root, 'native-state');
    const tensors: F32Tensors = {};
    for (const p of model.params()) tensors[p.name] = { shape: p.shape, data: model.getParam(p.name).map(() => 1) };
    mkdirSync(dir, { recursive: true });
    const master = join(dir, 'master.safetensors');
    writeFileSync(master, encodeSafetensorsF32(tensors));
    const before = model.getParam(model.params()[0]!.name);
    truncateSync(master, Math.floor(readFileSync(master).length * 0.6));
    await assert.rejects(policy.loadState(dir), (e: Error) => e.message.includes(master) && /truncated/.test(e.message));
    assert.deepEqual(model.getParam(model.params()[0]!.name), before);
    // a file of another model's shapes
    const wrong = { ...tensors, [model.params()[0]!.name]: { shape: [1], data: new Float32Array(1) } };
    writeFileSync(master, encodeSafetensorsF32(wrong));
    await assert.rejects(policy.loadState(dir), /master\.safetensors: tensor '.*' has shape \[1\], the model expects/);
    // optimizer moments: truncated
    writeFileSync(master, encodeSafetensorsF32(tensors));
    const st = model.optimizerState();
    const ot: F32Tensors = {};
    for (const [n, d] of Object.entries(st.tensors)) ot[n] = { shape: [d.length], data: d };
    const opt = join(dir, 'optimizer.safetensors');
    writeFileSync(opt, encodeSafetensorsF32(ot, { step: '3' }).subarray(0, 200 + Math.floor(rng.next() * 100)));
    await assert.rejects(policy.loadState(dir), (e: Error) => e.message.includes(opt));
    assert.deepEqual(model.getParam(model.params()[0]!.name), before);
  });
});

async function run(dir: string, c: TrainConfig, opts: { resume?: boolean; stopAfterStep?: number } = {}, lines: string[] = []) {
  const policy = new FakePolicy();
  const backend = new FakeBackend(policy);
  const progress = { start() {}, update() {}, end() {}, line: (l: string) => void lines.push(l) };
  const summary = await train(c, new RunDir(dir), { policy, backend, executor: new FakeExecutor(), prompts: new FakePromptBuilder(), problems: FAKE_PROBLEMS, progress }, { ...opts, handleSignals: false });
  return { policy, summary };
}

const strip = (ms: Record<string, unknown>[]) => ms.map(({ time: _t, ...rest }) => rest);

describe('checkpoint manifest and resume fallback', () => {
  it('each checkpoint has a manifest of every file and its config; damage to any file is found and named', async () => {
    const dir = join(root, 'manifest');
    await run(dir, fakeLoop({ maxSteps: 2 }));
    const ck = join(dir, 'checkpoints', 'step-000002');
    const m = JSON.parse(readFileSync(join(ck, 'manifest.json'), 'utf8')) as { version: number; files: Record<string, { bytes: number; xxh64: string }> };
    assert.equal(m.version, 2);
    assert.ok(m.files['state.json'] && m.files['config.json'] && m.files['fake-state.json'] && m.files['policy/config.json']);
    assert.equal(await checkpointFault(ck), null);
    // flip one byte somewhere in a random file: same size, different hash
    const files = Object.keys(m.files);
    const f = files[Math.floor(rng.next() * files.length)]!;
    const p = join(ck, f);
    const buf = readFileSync(p);
    const at = Math.floor(rng.next() * buf.length);
    buf[at] = buf[at]! ^ 0x20;
    writeFileSync(p, buf);
    assert.match((await manifestFault(ck))!, new RegExp(`${f.replace('.', '\\.')} does not match its XXH64 hash`));
    truncateSync(p, Math.floor(buf.length / 2));
    assert.match((await checkpointFault(ck))!, new RegExp(`${f.replace('.', '\\.')} has \\d+ bytes, the manifest says ${buf.length}`));
  });

  it('resume skips a damaged newest checkpoint, says so, continues exactly from the one before, and rotation keeps it', async () => {
    const dir = join(root, 'fallback');
    const full = join(root, 'fallback-full');
    await run(dir, fakeLoop(), { stopAfterStep: 4 });
    await run(full, fakeLoop());
    // damage the newest checkpoint: cut its state file (the truncated tensor file)
    const bad = join(dir, 'checkpoints', 'step-000004', 'fake-state.json');
    truncateSync(bad, 10);
    const lines: string[] = [];
    const { summary } = await run(dir, fakeLoop(), { resume: true }, lines);
    assert.equal(summary.steps, 6);
    assert.ok(lines.some((l) => l.includes('step-000004 is damaged') && l.includes(bad)), lines.join('\n'));
    assert.ok(lines.some((l) => /resuming from step-000002, the newest checkpoint that verifies/.test(l)), lines.join('\n'));
    // the damaged checkpoint was set aside, not trusted and not deleted; the run continued exactly
    assert.ok(existsSync(join(dir, 'checkpoints', 'step-000004.damaged')));
    assert.deepEqual(strip(readMetrics(join(dir, 'metrics.jsonl'))), strip(readMetrics(join(full, 'metrics.jsonl'))));
    const kept = readdirSync(join(dir, 'checkpoints')).filter((n) => /^step-\d+$/.test(n)).sort();
    assert.deepEqual(kept, ['step-000004', 'step-000006']);
    for (const n of kept) assert.equal(await checkpointFault(join(dir, 'checkpoints', n)), null);
  });

  it('beta > 0: the KL reference (the initial policy) is saved once, read back checked, and restored on resume', async () => {
    const out = join(root, 'reference');
    const demo = (over: Partial<TrainConfig>): TrainConfig => ({ ...defaultConfig(), out, maxSteps: 2, saveSteps: 2, batchSize: 2, numGenerations: 2, maxCompletionLength: 16, evalProblems: 1, evalIterations: 1, sftSteps: 0, beta: 0.04, ...over });
    const initial = await createDemoModel(defaultConfig().seed, defaultConfig().modelPreset);
    await runTraining(demo({}), { handleSignals: false, report: false });
    const ref = readSafetensorsF32(join(out, 'reference.safetensors')).tensors;
    assert.equal(tensorMismatch(ref, initial.params()), null);
    for (const p of initial.params()) assert.deepEqual(ref[p.name]!.data, initial.getParam(p.name), p.name);
    const r = await runTraining(resumeConfig(out, { maxSteps: 3 }), { resume: out, handleSignals: false, report: false });
    assert.equal(r.summary.steps, 3);
    assert.ok(r.summary.metrics.every((m) => Number.isFinite(m.loss)));
  });

  it('the issue\'s case with the native model: master.safetensors cut to 300 kB, then resume', async () => {
    const out = join(root, 'native-resume');
    const demo = (over: Partial<TrainConfig>): TrainConfig => ({ ...defaultConfig(), out, maxSteps: 4, saveSteps: 2, batchSize: 2, numGenerations: 2, maxCompletionLength: 16, evalProblems: 1, evalIterations: 1, sftSteps: 0, ...over });
    await runTraining(demo({}), { handleSignals: false, report: false });
    // each checkpoint records the engine it was trained on (a resume compares it with its own)
    assert.deepEqual(readTrainerState(join(out, 'checkpoints', 'step-000004')).engine, { device: 'cpu', storage: 'f32' });
    const master = join(out, 'checkpoints', 'step-000004', 'master.safetensors');
    truncateSync(master, 300_000);
    const lines: string[] = [];
    const r = await runTraining(resumeConfig(out, { maxSteps: 6 }), { resume: out, handleSignals: false, report: false, log: (l) => lines.push(l) });
    assert.equal(r.summary.steps, 6);
    assert.ok(lines.some((l) => l.includes(master) && /has 300000 bytes, the manifest says \d+/.test(l)), lines.join('\n'));
    assert.ok(lines.some((l) => /resuming from step-000002/.test(l)));
    assert.ok(existsSync(join(out, 'checkpoints', 'step-000004.damaged')));
  });

  it('no checkpoint verifies: resume refuses and lists every fault', async () => {
    const dir = join(root, 'all-bad');
    await run(dir, fakeLoop({ maxSteps: 4 }));
    for (const n of ['step-000002', 'step-000004']) writeFileSync(join(dir, 'checkpoints', n, 'state.json'), '{"version": 1, "ste');
    await assert.rejects(findResumeCheckpoint(new RunDir(dir)), /no checkpoint verifies \(step-000004: .*state\.json.*; step-000002: .*state\.json/);
    await assert.rejects(run(dir, fakeLoop({ maxSteps: 4 }), { resume: true }), /no checkpoint verifies/);
  });

  it('corrupt state.json and config.json give messages naming the file', async () => {
    const dir = join(root, 'json');
    await run(dir, fakeLoop({ maxSteps: 2 }));
    const ck = join(dir, 'checkpoints', 'step-000002');
    writeFileSync(join(ck, 'state.json'), '{"version": 1, "step": ');
    assert.throws(() => readTrainerState(ck), (e: Error) => e.message.includes(join(ck, 'state.json')) && /not valid JSON/.test(e.message));
    writeFileSync(join(ck, 'state.json'), JSON.stringify({ version: 1, step: 'two' }));
    assert.throws(() => readTrainerState(ck), /"step" is "two", expected an integer >= 0/);
    const ok = { version: 1, step: 2, problemsConsumed: 4, seed: 0, groupSize: 2, followUpGroupSize: 2, metricsBytes: 0, treesBytes: 0, optimizerState: true };
    writeFileSync(join(ck, 'state.json'), JSON.stringify(ok));
    assert.equal(readTrainerState(ck).engine, undefined); // checkpoints from before the engine record
    writeFileSync(join(ck, 'state.json'), JSON.stringify({ ...ok, engine: 'cuda' }));
    assert.throws(() => readTrainerState(ck), /"engine" is "cuda", expected \{"device", "storage"\}/);
    writeFileSync(join(dir, 'config.json'), '{"seed": 1, "learningRate": 0.0');
    assert.throws(() => resumeConfig(dir, {}), (e: Error) => e.message.includes(join(dir, 'config.json')) && /not valid JSON/.test(e.message));
  });
});
