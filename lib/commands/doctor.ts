// `murphy-native doctor`: what this installation can do on this machine.
import type { CommandModule } from 'yargs';
import { describeIsolation, type IsolationReport } from '../exec/index.js';
import { findCublasLt, type CublasLtReport } from '../gpu/cublaslt.js';
import { binaryInfo, cpuInfo, cuda } from '../native.js';

export interface DoctorReport {
  binary: ReturnType<typeof binaryInfo>;
  cpu: ReturnType<typeof cpuInfo>;
  cuda: ReturnType<typeof cuda.status>;
  /** cuBLASLt (the GPU engine's GEMMs, loaded at run time): which library and version, or why none. */
  cublasLt: CublasLtReport;
  node: string;
  platform: string;
  /** The code executor's protections on this machine; null when they could not be checked. */
  sandbox: IsolationReport | null;
  sandboxError?: string;
}

export async function doctorReport(opts: { python?: string } = {}): Promise<DoctorReport> {
  let sandbox: IsolationReport | null = null;
  let sandboxError: string | undefined;
  try {
    sandbox = await describeIsolation({ python: opts.python });
  } catch (err) {
    sandboxError = err instanceof Error ? err.message : String(err);
  }
  return {
    binary: binaryInfo(), cpu: cpuInfo(), cuda: cuda.status(), cublasLt: findCublasLt(), node: process.version, platform: `${process.platform}-${process.arch}`,
    sandbox, ...(sandboxError ? { sandboxError } : {}),
  };
}

const GiB = 1024 ** 3;

export function formatDoctor(r: DoctorReport): string {
  const lines: string[] = [];
  const kind = r.binary.cuda ? 'CUDA-enabled' : 'CPU-only';
  const src = { option: 'useNativeBinary()', env: 'MURPHY_NATIVE_BINARY', 'cuda-build': 'local CUDA build', prebuild: 'prebuilt binary', 'local-build': 'local build' }[r.binary.source];
  lines.push(`native addon   ${kind}, ${src}: ${r.binary.path}`);
  lines.push(`               why: ${r.binary.reason}`);
  for (const n of r.binary.notes) lines.push(`               note: ${n}`);
  lines.push(`               N-API ${r.binary.napiVersion}${r.binary.compiler ? `, built with gcc ${r.binary.compiler}` : ''}`);
  lines.push(`node           ${r.node} on ${r.platform}`);
  lines.push(`cpu            ${r.cpu.threads} kernel threads (of ${r.cpu.hardwareConcurrency} hardware threads; MURPHY_NUM_THREADS sets it), SIMD: ${r.cpu.simd}${r.cpu.avx512bf16 ? ' (+avx512_bf16)' : ''}`);
  if (r.cuda.available) {
    lines.push(`cuda           runtime ${r.cuda.runtimeVersion}, driver ${r.cuda.driverVersion}`);
    for (const d of r.cuda.devices) {
      lines.push(`  device ${d.index}     ${d.name}, ${(d.totalMemory / GiB).toFixed(1)} GiB (${(d.freeMemory / GiB).toFixed(1)} free), compute capability ${d.computeCapability}, ${d.multiprocessors} SMs`);
    }
  } else {
    lines.push(`cuda           ${r.cuda.reason}`);
  }
  lines.push(r.cublasLt.found
    ? `cublasLt       ${r.cublasLt.versionText} from ${r.cublasLt.path} (${r.cublasLt.origin})`
    : `cublasLt       ${r.cublasLt.reason}`);
  if (r.sandbox) {
    const s = r.sandbox;
    lines.push(`sandbox        ${s.bubblewrap ? 'bubblewrap' : 'no bubblewrap (weaker isolation)'}, mode ${s.mode}, python ${s.python}`);
    lines.push(`  network      ${s.network}`);
    lines.push(`  files        ${s.filesystem}`);
    lines.push(`  limits       ${s.limits.join('; ')}`);
    if (s.unprotected) lines.push(`  unprotected  ${s.unprotected}`);
    for (const n of s.notes) lines.push(`  note         ${n}`);
  } else {
    lines.push(`sandbox        could not be checked: ${r.sandboxError ?? 'unknown error'}`);
  }
  return lines.join('\n');
}

export const doctorCommand: CommandModule<object, { json: boolean; python?: string }> = {
  command: 'doctor',
  describe: 'Show which native binary is loaded, CPU threads and SIMD level, CUDA devices, cuBLASLt and sandbox protections',
  builder: (y) =>
    y
      .option('json', { type: 'boolean', default: false, describe: 'Print the report as JSON' })
      .option('python', { type: 'string', describe: 'Python interpreter the executor uses (default: python3 on PATH)' }),
  handler: async (argv) => {
    const r = await doctorReport({ python: argv.python });
    process.stdout.write(argv.json ? `${JSON.stringify(r, null, 2)}\n` : `${formatDoctor(r)}\n`);
  },
};
