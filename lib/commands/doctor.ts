// `murphy-native doctor`: what this installation can do on this machine.
import type { CommandModule } from 'yargs';
import { binaryInfo, cpuInfo, cuda } from '../native.js';

export interface DoctorReport {
  binary: ReturnType<typeof binaryInfo>;
  cpu: ReturnType<typeof cpuInfo>;
  cuda: ReturnType<typeof cuda.status>;
  node: string;
  platform: string;
}

export function doctorReport(): DoctorReport {
  return { binary: binaryInfo(), cpu: cpuInfo(), cuda: cuda.status(), node: process.version, platform: `${process.platform}-${process.arch}` };
}

const GiB = 1024 ** 3;

export function formatDoctor(r: DoctorReport): string {
  const lines: string[] = [];
  const kind = r.binary.cuda ? 'CUDA-enabled' : 'CPU-only';
  const src = { env: 'MURPHY_NATIVE_BINARY', 'cuda-build': 'local CUDA build', prebuild: 'prebuilt binary', 'local-build': 'local build' }[r.binary.source];
  lines.push(`native addon   ${kind}, ${src}: ${r.binary.path}`);
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
  return lines.join('\n');
}

export const doctorCommand: CommandModule<object, { json: boolean }> = {
  command: 'doctor',
  describe: 'Show which native binary is loaded, CPU threads and SIMD level, CUDA devices and sandbox protections',
  builder: (y) => y.option('json', { type: 'boolean', default: false, describe: 'Print the report as JSON' }),
  handler: (argv) => {
    const r = doctorReport();
    process.stdout.write(argv.json ? `${JSON.stringify(r, null, 2)}\n` : `${formatDoctor(r)}\n`);
  },
};
