// The benchmarks' arrays on 2 MiB pages, as the bandwidth probe's (bench/stream.cc) and the
// model's weights (native/include/murphy/model/big_buffer.h) are, and as the PyTorch / numpy
// peer's are (bench/peer.ts, PEER_MALLOC_TUNABLE): glibc gives Node's large ArrayBuffers fresh
// mmap'd memory on 4 KiB pages unless transparent huge pages are "always" or malloc asks for them
// (glibc >= 2.35: GLIBC_TUNABLES=glibc.malloc.hugetlb=1). On the 2-vCPU KVM VM 4 KiB pages cost
// the log-prob backward 1.4x and the forward 1.15x per core (docs/kernels.md). So a benchmark
// re-executes itself with the tunable (--4k-pages keeps the default), and its JSON records which,
// and how much of its memory was on huge pages at the end (AnonHugePages).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export const HUGE_TUNABLE = 'glibc.malloc.hugetlb=1';

/**
 * On Linux, unless `keep4k` or GLIBC_TUNABLES already names glibc.malloc.hugetlb: runs this
 * script again with the tunable added, the same arguments and stdio, and exits with its status.
 */
export function reexecWithHugePages(argv: readonly string[], keep4k: boolean): void {
  if (process.platform !== 'linux' || keep4k || (process.env.GLIBC_TUNABLES ?? '').includes('glibc.malloc.hugetlb')) return;
  const env = { ...process.env, GLIBC_TUNABLES: [process.env.GLIBC_TUNABLES, HUGE_TUNABLE].filter(Boolean).join(':') };
  const r = spawnSync(process.execPath, [...process.execArgv, process.argv[1]!, ...argv], { stdio: 'inherit', env });
  process.exit(r.status ?? 1);
}

/** The page size as configured for this process, and its memory on huge pages now (MiB). */
export function kernelPages(): { tunable: string | null; transparent_hugepage: string | null; anon_huge_pages_mib: number | null } {
  const read = (f: string) => { try { return readFileSync(f, 'utf8'); } catch { return null; } };
  const thp = read('/sys/kernel/mm/transparent_hugepage/enabled');
  const rollup = read('/proc/self/smaps_rollup');
  const kb = rollup ? /AnonHugePages:\s+(\d+) kB/.exec(rollup)?.[1] : undefined;
  return {
    tunable: (process.env.GLIBC_TUNABLES ?? '').includes(HUGE_TUNABLE) ? HUGE_TUNABLE : null,
    transparent_hugepage: thp ? (/\[(\w+)\]/.exec(thp)?.[1] ?? null) : null,
    anon_huge_pages_mib: kb === undefined ? null : Math.round(Number(kb) / 1024),
  };
}
