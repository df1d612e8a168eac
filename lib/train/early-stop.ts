// Early stop when the training signal has vanished: once every group of a step has zero reward
// variance, its advantages are 0 and the step trains nothing (0 tokens, no optimizer step), so
// a run whose policy has solved (or collapsed on) its problems only samples. The rule looks at
// the share of groups with a learning signal (some reward variance) over the last `window`
// steps and stops when it is at most `minSignal` (config keys earlyStopWindow,
// earlyStopMinSignal; docs/training.md).
import type { StepMetrics } from './metrics.js';

type Figures = Pick<StepMetrics, 'step' | 'problems' | 'groupsPerTree' | 'zeroVarianceGroups' | 'reward'>;

/** Groups with some reward variance in a step (the ones that train). */
export function signalGroups(m: Figures): { groups: number; withSignal: number } {
  const groups = Math.round(m.groupsPerTree * m.problems);
  return { groups, withSignal: Math.max(0, groups - m.zeroVarianceGroups) };
}

export class SignalWindow {
  private readonly rows: { groups: number; withSignal: number; reward: number }[] = [];

  /** window: steps looked at (0 = never stop); minSignal: the share of groups at or below which it stops. */
  constructor(private readonly window: number, private readonly minSignal: number) {}

  /** Adds a step; returns the reason to stop (one line) or null. */
  push(m: Figures): string | null {
    if (this.window <= 0) return null;
    this.rows.push({ ...signalGroups(m), reward: m.reward });
    if (this.rows.length > this.window) this.rows.shift();
    if (this.rows.length < this.window) return null;
    const groups = this.rows.reduce((a, r) => a + r.groups, 0);
    const withSignal = this.rows.reduce((a, r) => a + r.withSignal, 0);
    const share = groups > 0 ? withSignal / groups : 0;
    if (share > this.minSignal) return null;
    const pct = (x: number) => `${(100 * x).toFixed(x > 0 && x < 0.01 ? 1 : 0)}%`;
    // the mean reward tells a solved task (near 1) from a collapsed policy (near 0)
    const reward = this.rows.reduce((a, r) => a + r.reward, 0) / this.rows.length;
    return `no training signal: ${withSignal} of ${groups} groups (${pct(share)}) had reward variance in the last ${this.window} steps ` +
      `(steps ${m.step - this.window + 1}-${m.step}; earlyStopMinSignal ${this.minSignal}); mean reward ${reward.toFixed(2)}`;
  }
}
