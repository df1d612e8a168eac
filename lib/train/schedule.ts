// The learning-rate schedule: linear warm-up, then constant, cosine or linear decay to a floor.

export interface ScheduleOptions {
  type: 'constant' | 'cosine' | 'linear';
  peak: number;
  warmupSteps: number;
  totalSteps: number;
  /** Floor as a fraction of the peak (cosine/linear). */
  minRatio: number;
}

/** Learning rate of 1-based step `step`: linear warm-up, then constant / cosine / linear decay. */
export function learningRate(step: number, o: ScheduleOptions): number {
  if (o.warmupSteps > 0 && step <= o.warmupSteps) return (o.peak * step) / o.warmupSteps;
  if (o.type === 'constant') return o.peak;
  const span = Math.max(1, o.totalSteps - o.warmupSteps);
  const p = Math.min(1, Math.max(0, (step - o.warmupSteps) / span));
  const floor = o.peak * o.minRatio;
  if (o.type === 'linear') return floor + (o.peak - floor) * (1 - p);
  return floor + (o.peak - floor) * 0.5 * (1 + Math.cos(Math.PI * p));
}
