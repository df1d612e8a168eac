// The SandboxFusion backend against a small local server that checks the request shape
// and runs the script (unsandboxed: test only) the way run_code does.
// Each reference solution the service runs is a fresh interpreter (~0.1 s of CPU): `npm test`
// sends one random sample problem of each dataset and test kind (7 of the 13; the seed is
// printed), MURPHY_BENCHMARKS=all (`npm run test:benchmarks`, in CI after `npm test`) every one.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { jsonlFromRecords, loadSample, type Problem } from '../../lib/data/index.js';
import { resolveConfig } from '../../lib/config/index.js';
import { createExecutor, probePython, PythonExecutor, SandboxFusionExecutor, type RunCodeRequest } from '../../lib/exec/index.js';
import { Rng, testSeed } from '../helpers/random.js';

const ALL = process.env.MURPHY_BENCHMARKS === 'all';

/** Every problem (MURPHY_BENCHMARKS=all), else one drawn at random from each group of the same dataset and test kind, in their order. */
function onePerKind(problems: { dataset: string; problems: Problem[] }[], rng: Rng | null): Problem[] {
  if (rng === null) return problems.flatMap((d) => d.problems);
  const groups = new Map<string, Problem[]>();
  for (const d of problems) for (const p of d.problems) {
    const key = `${d.dataset} ${p.tests.kind}`;
    const group = groups.get(key);
    if (group) group.push(p);
    else groups.set(key, [p]);
  }
  return [...groups.values()].map((g) => g[rng.int(g.length)]!);
}

let server: Server;
let url: string;
/** The interpreter itself, resolved once: `python3` may be a pyenv shim, a bash script that costs ~60 ms of CPU a start. */
let python: string;
const seen: RunCodeRequest[] = [];

function checkShape(b: unknown): string | null {
  const r = b as Record<string, unknown>;
  if (!r || typeof r !== 'object') return 'body is not an object';
  if (typeof r.code !== 'string' || !r.code) return 'code must be a non-empty string';
  if (r.language !== 'python') return 'language must be "python"';
  if (typeof r.run_timeout !== 'number' || typeof r.compile_timeout !== 'number') return 'timeouts must be numbers';
  if (!r.files || typeof r.files !== 'object') return 'files must be an object';
  for (const [k, v] of Object.entries(r.files as Record<string, unknown>)) {
    if (typeof v !== 'string' || Buffer.from(v, 'base64').toString('base64') !== v) return `files.${k} must be base64`;
  }
  if (!Array.isArray(r.fetch_files)) return 'fetch_files must be a list';
  return null;
}

before(async () => {
  python = (await probePython(process.env.MURPHY_PYTHON ?? 'python3')).executable;
  server = createServer((req, res) => {
    if (req.method !== 'POST' || req.url !== '/run_code' || !String(req.headers['content-type']).startsWith('application/json')) {
      res.writeHead(404).end('not found');
      return;
    }
    let data = '';
    req.on('data', (d: Buffer) => (data += d.toString()));
    req.on('end', () => {
      const body = JSON.parse(data) as RunCodeRequest;
      const bad = checkShape(body);
      if (bad) {
        res.writeHead(422, { 'content-type': 'application/json' }).end(JSON.stringify({ detail: bad }));
        return;
      }
      seen.push(body);
      const dir = mkdtempSync(join(tmpdir(), 'sf-'));
      for (const [k, v] of Object.entries(body.files)) writeFileSync(join(dir, k), Buffer.from(v, 'base64'));
      writeFileSync(join(dir, 'main.py'), body.code);
      const t0 = Date.now();
      execFile(python, ['main.py'], { cwd: dir, timeout: body.run_timeout * 1000, maxBuffer: 64 << 20 }, (err, stdout, stderr) => {
        rmSync(dir, { recursive: true, force: true });
        const e = err as (Error & { code?: number; killed?: boolean }) | null;
        const status = e?.killed ? 'TimeLimitExceeded' : e ? 'Error' : 'Finished';
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            status: status === 'Finished' ? 'Success' : 'Failed',
            message: '',
            compile_result: null,
            run_result: { status, execution_time: (Date.now() - t0) / 1000, return_code: e?.code ?? 0, stdout, stderr },
            executor_pod_name: 'local',
            files: {},
          }),
        );
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.close();
});

describe('SandboxFusion backend', () => {
  it('sends run_code requests of the right shape and reads per-test results', async () => {
    const ex = new SandboxFusionExecutor({ endpoint: url, limits: { testTimeout: 2, programTimeout: 10 } });
    const [p] = await loadSample('humaneval');
    const good = await ex.run(p, p.referenceSolution as string);
    assert.equal(good.passed, true, good.feedback);
    assert.equal(good.backend, 'sandboxfusion');
    assert.equal(good.numTests, 7);
    const bad = await ex.run(p, p.prompt + '    return None\n');
    assert.equal(bad.reward, 0);
    assert.match(bad.feedback, /Test 1 failed: assert candidate/);
    assert.ok(seen.length >= 2);
    assert.equal(seen[0].language, 'python');
    assert.ok('pytest_shim.py' in seen[0].files);
  });
  it('all test kinds, timeouts, and a fake result line printed by the program', async () => {
    // The reference solutions get limits no loaded machine reaches (a LiveCodeBench stdin test
    // took over 1 s on a 2-core VM where starting a process costs ~5 ms of page faults); the
    // endless loop gets a 0.25 s test limit (it burns a core until then), the limit its timeout
    // is checked against. Its program limit stays long: the local service's run_timeout is
    // programTimeout + 5 s of wall time, and at load 5 on 2 cores, with every request of this test
    // starting an interpreter at once, the loop's interpreter start, harness and 1 s test took over
    // 10 s and came back as an error.
    const ex = new SandboxFusionExecutor({ endpoint: url + '/', limits: { testTimeout: 20, programTimeout: 120 } });
    const short = new SandboxFusionExecutor({ endpoint: url + '/', limits: { testTimeout: 0.25, programTimeout: 60 } });
    // All at once: each request is a fresh interpreter on the local service.
    const datasets = await Promise.all((['kodcode', 'livecodebench', 'jsonl'] as const).map(async (dataset) => ({ dataset, problems: await loadSample(dataset) })));
    const problems = onePerKind(datasets, ALL ? null : new Rng(testSeed('remote.test.ts (a sample problem of each dataset and test kind; MURPHY_BENCHMARKS=all: all)')));
    if (!ALL) assert.equal(new Set(problems.map((p) => p.tests.kind)).size, 4, 'pytest, stdio, functional and assert tests are all sent');
    const [add] = jsonlFromRecords([{ id: 'a', prompt: 'a', asserts: ['assert add(1, 2) == 3'] }]);
    const [results, loop, fake] = await Promise.all([
      Promise.all(problems.map((p) => ex.run(p, p.referenceSolution as string))),
      short.run(add, 'def add(a, b):\n    while True: pass\n'),
      short.run(add, 'print("MURPHY-0000:{\\"tests\\": []}")\ndef add(a, b):\n    return 0\n'),
    ]);
    problems.forEach((p, i) => assert.equal(results[i].passed, true, `${p.id}: ${results[i].feedback}`));
    assert.equal(loop.tests[0].status, 'timeout', `the endless loop: ${loop.feedback}`);
    assert.equal(fake.reward, 0);
  });
  it('--executor sandboxfusion --sandbox-url: createExecutor and the config keys select it', async () => {
    const ex = createExecutor({ kind: 'sandboxfusion', sandboxUrl: url, limits: { testTimeout: 2, programTimeout: 10 } });
    await ex.start();
    const [p] = await loadSample('humaneval');
    const r = await ex.execute(p, p.referenceSolution as string);
    assert.equal(r.backend, 'sandboxfusion');
    assert.equal(r.passed, true, r.feedback);
    await ex.close();
    assert.throws(() => createExecutor({ kind: 'sandboxfusion' }), /--executor sandboxfusion needs --sandbox-url URL/);
    assert.throws(() => resolveConfig({ flags: { executor: 'sandboxfusion' } }), /"sandboxUrl" \(--sandbox-url\) is required with executor "sandboxfusion"/);
    const c = resolveConfig({ flags: { executor: 'sandboxfusion', sandboxUrl: url } });
    assert.equal(c.executor, 'sandboxfusion');
    assert.ok(createExecutor({ kind: 'local' }) instanceof PythonExecutor);
  });
  it('an unreachable or failing service scores 0 with the reason', async () => {
    const ex = new SandboxFusionExecutor({ endpoint: 'http://127.0.0.1:1', httpSlackMs: 2000, limits: { programTimeout: 1 } });
    const [add] = jsonlFromRecords([{ id: 'a', prompt: 'a', asserts: ['assert add(1, 2) == 3'] }]);
    const r = await ex.run(add, 'def add(a, b):\n    return a + b\n');
    assert.equal(r.reward, 0);
    assert.match(r.errors[0], /SandboxFusion request failed/);
  });
});
