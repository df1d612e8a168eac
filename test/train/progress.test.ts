// lib/train/progress.ts: bars on a terminal, plain lines otherwise, the figures that move.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fmtTime, RecentSteps, StderrProgress } from '../../lib/train/progress.js';

function fakeStream(tty: boolean) {
  return { isTTY: tty, columns: 200, out: '', write(s: string) { this.out += s; return true; } };
}
/** A clock the test moves by hand. */
function clock() {
  const c = { t: 0, now: () => c.t };
  return c;
}

describe('progress', () => {
  it('not a terminal: a plain line every total/10 units with elapsed and time left, one line at the end, no escape codes', () => {
    const s = fakeStream(false);
    const c = clock();
    const p = new StderrProgress(s, { now: c.now });
    p.start('train', 500);
    for (let i = 1; i <= 500; i++) {
      c.t += 200; // 0.2 s per step
      p.update(i, `reward ${i}`);
    }
    p.end();
    const lines = s.out.trimEnd().split('\n');
    assert.equal(lines.length, 10, s.out); // 50, 100, ..., 450, then the end line
    assert.equal(lines[0], 'train  50/500  00:10 elapsed, 01:30 left  reward 50');
    assert.equal(lines[9], 'train 500/500  done in 01:40  reward 500');
    assert.doesNotMatch(s.out, /\x1b/);
  });

  it('a terminal: one bar redrawn in place, sub-phases after it, left as one finished line', () => {
    const s = fakeStream(true);
    const c = clock();
    const p = new StderrProgress(s, { now: c.now });
    p.start('train', 4);
    const inner = p.nested();
    for (let i = 1; i <= 4; i++) {
      c.t += 800;
      inner.start('rollout', 8);
      c.t += 200;
      inner.update(3);
      inner.end();
      p.update(i, `step ${i}`);
    }
    p.end();
    assert.match(s.out, /\r\x1b\[2Ktrain    ░+ 0\/4  00:00 elapsed, --:-- left/);
    assert.match(s.out, /\[rollout 3\/8\]/);
    assert.match(s.out, /\r\x1b\[2Ktrain    ██████+░+ 2\/4  00:02 elapsed, 00:02 left  step 2/);
    const finished = s.out.split('\r\x1b[2K').at(-1)!;
    assert.equal(finished, `train    ${'█'.repeat(24)} 4/4  00:04  step 4\n`);
    assert.equal(s.out.split('\n').length - 1, 1, 'one newline: the finished bar');
  });

  it('lines go above the bar, which is redrawn after them', () => {
    const s = fakeStream(true);
    const p = new StderrProgress(s, { now: () => 0 });
    p.start('eval', 0);
    p.line('hello');
    assert.match(s.out, /\r\x1b\[2Khello\n\r\x1b\[2Keval +0 +00:00 elapsed, total unknown$/);
  });

  it('formats times past an hour', () => {
    assert.equal(fmtTime(59.9), '00:59');
    assert.equal(fmtTime(3725), '1:02:05');
    assert.equal(fmtTime(NaN), '--:--');
  });

  it('recent figures: reward and pass@1 per turn, tokens trained, groups with signal, averaged over the last steps', () => {
    const r = new RecentSteps(2);
    const m = (p1: number, p2: number, zero: number) => ({ rewardPerTurn: [p1, p2], passAt1PerTurn: [p1, p2], tokensTrained: 7400 + zero * 100, zeroVarianceGroups: zero, groupsPerTree: 2.5, problems: 8 });
    r.push(m(0, 0, 20));
    r.push(m(0.5, 0.6, 10));
    r.push(m(0.7, 0.8, 0));
    assert.equal(r.format(), 'reward t1 0.60 t2 0.70 · pass@1 t1 60% t2 70% · 7.9k tokens trained/step · signal in 75% of groups (mean of last 2 steps)');
  });
});
