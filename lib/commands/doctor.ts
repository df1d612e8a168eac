// `murphy-native doctor`: what this installation can do on this machine.
import type { CommandModule } from 'yargs';
import type { IsolationReport } from '../exec/index.js';
import type { CublasLtReport } from '../gpu/cublaslt.js';
import type { NcclReport } from '../gpu/nccl.js';
import type { binaryInfo, cpuInfo, cuda, CudaStatus, gemmInfo } from '../native.js';

export interface DoctorReport {
  binary: ReturnType<typeof binaryInfo>;
  cpu: ReturnType<typeof cpuInfo>;
  /** The CPU matrix products' path 'auto' takes here and the paths this CPU runs (docs/kernels.md, "Dispatch"); absent when the binary predates it. */
  gemm?: ReturnType<typeof gemmInfo>;
  cuda: ReturnType<typeof cuda.status>;
  /** One line when the NVIDIA driver is too old for the binary's CUDA runtime; null otherwise. */
  driverTooOld: string | null;
  /** cuBLASLt (the GPU engine's GEMMs, loaded at run time): which library and version, or why none. */
  cublasLt: CublasLtReport;
  /** NCCL (multi-GPU collectives and weight sync to vLLM, loaded at run time): which library and version, or why none. */
  nccl: NcclReport;
  node: string;
  platform: string;
  /** The code executor's protections on this machine; null when they could not be checked. */
  sandbox: IsolationReport | null;
  sandboxError?: string;
}

/** A CUDA version number (1000 * major + 10 * minor, as the CUDA API gives it) as "13.0". */
function cudaVersion(v: number): string {
  return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
}

/** The oldest Linux driver of each CUDA major version (NVIDIA's CUDA release notes, table 3). */
const MIN_LINUX_DRIVER: Record<number, string> = { 12: '525.60.13', 13: '580.65.06' };

/**
 * Says, in one line, when the NVIDIA driver is too old for the CUDA runtime linked into the
 * binary; null when it is new enough, when there is no driver (driverVersion 0) or no CUDA
 * build. cudaDriverGetVersion gives the newest CUDA version the driver supports; a runtime of
 * CUDA major M runs on any driver for M.x (minor-version compatibility), not on an older major.
 */
export function driverTooOld(s: Pick<CudaStatus, 'built' | 'runtimeVersion' | 'driverVersion'>): string | null {
  if (!s.built || s.runtimeVersion <= 0 || s.driverVersion <= 0) return null;
  const need = Math.floor(s.runtimeVersion / 1000);
  if (Math.floor(s.driverVersion / 1000) >= need) return null;
  const min = MIN_LINUX_DRIVER[need] ? `, Linux driver ${MIN_LINUX_DRIVER[need]} or newer` : '';
  return (
    `NVIDIA driver too old: it supports CUDA ${cudaVersion(s.driverVersion)}, this binary's CUDA runtime is ` +
    `${cudaVersion(s.runtimeVersion)} (needs a driver for CUDA ${need}.x${min}); update the driver, or build the ` +
    'CUDA addon from source with your own toolkit (README: Install)'
  );
}

export async function doctorReport(opts: { python?: string } = {}): Promise<DoctorReport> {
  // loaded here, not with the command list: the CLI's other commands do not pay for them
  const [{ describeIsolation }, { findCublasLt }, { findNccl }, { binaryInfo, cpuInfo, cuda, gemmInfo }] = await Promise.all([
    import('../exec/index.js'), import('../gpu/cublaslt.js'), import('../gpu/nccl.js'), import('../native.js'),
  ]);
  let sandbox: IsolationReport | null = null;
  let sandboxError: string | undefined;
  try {
    sandbox = await describeIsolation({ python: opts.python });
  } catch (err) {
    sandboxError = err instanceof Error ? err.message : String(err);
  }
  const status = cuda.status();
  return {
    binary: binaryInfo(), cpu: cpuInfo(), ...gemmOrNothing(gemmInfo), cuda: status, driverTooOld: driverTooOld(status), cublasLt: findCublasLt(), nccl: findNccl(),
    node: process.version, platform: `${process.platform}-${process.arch}`,
    sandbox, ...(sandboxError ? { sandboxError } : {}),
  };
}

const GiB = 1024 ** 3;

/** { gemm } from gemmInfo, or nothing where the binary predates it (ENOLIB: doctor still reports the rest). */
function gemmOrNothing(info: typeof gemmInfo): { gemm?: ReturnType<typeof gemmInfo> } {
  try {
    const { best, paths } = info();
    return { gemm: { best, paths } };
  } catch (e) {
    if ((e as { code?: unknown }).code === 'ENOLIB') return {};
    throw e;
  }
}

/** The CPU's extensions the kernels use beyond its SIMD level: ' (+avx512_bf16, +amx_bf16)'. */
function simdExtras(cpu: DoctorReport['cpu']): string {
  const x = [cpu.avx512bf16 ? '+avx512_bf16' : '', cpu.amxBf16 ? '+amx_bf16' : ''].filter(Boolean);
  return x.length ? ` (${x.join(', ')})` : '';
}

export function formatDoctor(r: DoctorReport): string {
  const lines: string[] = [];
  const kind = r.binary.cuda ? 'CUDA-enabled' : 'CPU-only';
  const src = { option: 'useNativeBinary()', env: 'MURPHY_NATIVE_BINARY', 'cuda-build': 'local CUDA build', prebuild: 'prebuilt binary', 'local-build': 'local build' }[r.binary.source];
  lines.push(`native addon   ${kind}, ${src}: ${r.binary.path}`);
  lines.push(`               why: ${r.binary.reason}`);
  for (const n of r.binary.notes) lines.push(`               note: ${n}`);
  lines.push(`               N-API ${r.binary.napiVersion}${r.binary.compiler ? `, built with gcc ${r.binary.compiler}` : ''}`);
  lines.push(`node           ${r.node} on ${r.platform}`);
  lines.push(`cpu            ${r.cpu.threads} kernel threads (of ${r.cpu.hardwareConcurrency} hardware threads; MURPHY_NUM_THREADS sets it), SIMD: ${r.cpu.simd}${simdExtras(r.cpu)}`);
  if (r.gemm) lines.push(`               matrix products: ${r.gemm.best} (of ${r.gemm.paths.join(', ')}; MURPHY_GEMM_PATH sets it)`);
  if (r.driverTooOld) {
    lines.push(`cuda           ${r.driverTooOld}`);
  } else if (r.cuda.built && !r.cuda.available && r.cuda.driverVersion === 0 && r.cuda.runtimeVersion > 0) {
    // cudaDriverGetVersion gives 0 when no driver is installed; the runtime's own text for that
    // ("driver version is insufficient") reads as if the driver were too old.
    const v = cudaVersion(r.cuda.runtimeVersion);
    lines.push(`cuda           no CUDA device: no NVIDIA driver is installed (the binary's CUDA runtime is ${v}; a GPU needs a driver for CUDA ${v.split('.')[0]}.x)`);
  } else if (r.cuda.available) {
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
  lines.push(r.nccl.found
    ? `nccl           ${r.nccl.versionText} from ${r.nccl.path} (${r.nccl.origin})`
    : `nccl           ${r.nccl.reason}`);
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
  describe: 'Show which native binary is loaded, CPU threads and SIMD level, CUDA devices, cuBLASLt, NCCL and sandbox protections',
  builder: (y) =>
    y
      .option('json', { type: 'boolean', default: false, describe: 'Print the report as JSON' })
      .option('python', { type: 'string', describe: 'Python interpreter the executor uses (default: python3 on PATH)' }),
  handler: async (argv) => {
    const r = await doctorReport({ python: argv.python });
    process.stdout.write(argv.json ? `${JSON.stringify(r, null, 2)}\n` : `${formatDoctor(r)}\n`);
  },
};
