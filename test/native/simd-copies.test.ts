// Every kernel compiled three times by native/cpu/simd_multiversion.inc (murphy::cpu_v4 for
// AVX-512, cpu_v3 for AVX2+FMA, cpu_base) must be vectorised in its AVX2 copy wherever its
// AVX-512 copy is: the loops are plain C++ that GCC vectorises under `#pragma omp simd`, and
// when it cannot, it compiles them as scalar code without a word. Until 2026-12-07 AdamW's
// update (a 16-bit store under a condition: AVX2 has no masked 16-bit store) and SwiGLU's
// forward and backward (selects that GCC would not if-convert while floating-point traps could
// matter: now -fno-trapping-math) ran scalar on AVX2 machines: AdamW 3.4x slower than it is now
// on a Zen 3. This reads the built binary's disassembly (objdump): each cpu_v3 function whose
// cpu_v4 twin uses vector registers must use ymm registers.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { chooseBinary } from '../../lib/native/loader.js';

const binary = (() => {
  try {
    return chooseBinary().path;
  } catch {
    return null;
  }
})();
const objdump = spawnSync('objdump', ['--version'], { encoding: 'utf8' });
const skip =
  process.arch !== 'x64' ? 'not an x86-64 machine'
  : binary === null || !existsSync(binary) ? 'no native binary built'
  : objdump.status !== 0 ? 'no objdump (binutils) on PATH'
  : false;

/**
 * objdump's --start-address and --stop-address around every cpu_v3 and cpu_v4 function (nm's
 * symbols with their sizes), or nothing (the whole binary) when nm finds none: they take about
 * half of the text, and disassembling is most of this file's ~0.6 s of CPU.
 */
function copiesSpan(path: string): string[] {
  const r = spawnSync('nm', ['-C', '--defined-only', '-S', path], { encoding: 'utf8', maxBuffer: 1 << 28 });
  let lo = Infinity, hi = 0;
  for (const m of (r.status === 0 ? r.stdout : '').matchAll(/^([0-9a-f]+) ([0-9a-f]+) [tT] murphy::cpu_v[34]::/gm)) {
    const at = parseInt(m[1]!, 16);
    lo = Math.min(lo, at);
    hi = Math.max(hi, at + parseInt(m[2]!, 16));
  }
  return hi > lo ? [`--start-address=0x${lo.toString(16)}`, `--stop-address=0x${hi.toString(16)}`] : [];
}

/** Per copy (v4, v3), per function (its name without the namespace): [instructions, those naming a vector register of the copy's width or wider]. */
function vectorUse(path: string): Map<string, Map<string, [number, number]>> {
  const r = spawnSync('objdump', ['-d', '--no-show-raw-insn', '-C', ...copiesSpan(path), path], { encoding: 'utf8', maxBuffer: 1 << 30 });
  assert.equal(r.status, 0, `objdump -d ${path}: ${r.stderr}`);
  const copies = new Map<string, Map<string, [number, number]>>([['v4', new Map()], ['v3', new Map()]]);
  let cur: [number, number] | null = null;
  let wide = /%[yz]mm/;
  for (const line of r.stdout.split('\n')) {
    const head = /^[0-9a-f]+ <murphy::cpu_(v4|v3)::(.*)>:$/.exec(line);
    if (head) {
      const fns = copies.get(head[1])!;
      cur = fns.get(head[2]) ?? [0, 0];
      fns.set(head[2], cur);
      wide = head[1] === 'v4' ? /%[yz]mm/ : /%ymm/;
      continue;
    }
    if (/^[0-9a-f]+ </.test(line)) {
      cur = null;
      continue;
    }
    if (cur && /^\s+[0-9a-f]+:\t/.test(line)) {
      cur[0]++;
      if (wide.test(line)) cur[1]++;
    }
  }
  return copies;
}

describe('the SIMD copies of the CPU kernels', { skip }, () => {
  it('each AVX2 copy (cpu_v3) is vectorised where its AVX-512 copy (cpu_v4) is', (t) => {
    const use = vectorUse(binary!);
    const v4 = use.get('v4')!, v3 = use.get('v3')!;
    if (v3.size === 0) return void t.skip(`${binary} has no cpu_v3 symbols (stripped): nothing to read`);
    const scalar: string[] = [];
    let checked = 0;
    for (const [fn, [, vec4]] of v4) {
      const c3 = v3.get(fn);
      if (!c3 || vec4 === 0) continue;
      checked++;
      if (c3[1] === 0) scalar.push(`${fn} (${c3[0]} instructions, none on ymm; the AVX-512 copy has ${vec4} on zmm/ymm)`);
    }
    assert.ok(checked >= 20, `only ${checked} kernels found in both copies of ${binary}`);
    assert.deepEqual(scalar, [], `AVX2 copies compiled as scalar code in ${binary}:\n${scalar.join('\n')}`);
  });
});
