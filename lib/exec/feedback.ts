// The feedback text shown to the model after a failed attempt (template in docs/executor.md).
import type { FeedbackOptions, SyntaxErrorInfo, TestCaseResult } from './types.js';
import { DEFAULT_FEEDBACK } from './types.js';

export interface FeedbackInput {
  tests: TestCaseResult[];
  syntaxError?: SyntaxErrorInfo;
  setupError?: { errorType: string; message: string; traceback?: string };
  testTimeout: number;
}

function clip(s: string, n: number): string {
  const t = s.replace(/\s+$/, '');
  return t.length <= n ? t : t.slice(0, Math.max(0, n - 15)) + ' ...[truncated]';
}

function indent(s: string, pad: string): string {
  return s.split('\n').map((l) => pad + l).join('\n');
}

/** Describes one failing test, in the template's words. */
export function describeFailure(t: TestCaseResult, o: FeedbackOptions, testTimeout: number): string {
  const src = clip(t.source.trim(), o.maxValueChars);
  const srcBlock = src.includes('\n') ? '\n' + indent(src, '    ') : ' ' + src;
  if (t.errorType === 'NotRun') return `Test ${t.index + 1} did not run: ${t.message ?? ''}`;
  if (t.status === 'timeout') return `Test ${t.index + 1} timed out after ${testTimeout} s:${srcBlock}`;
  const lines = [`Test ${t.index + 1} failed:${srcBlock}`];
  if (t.expected !== undefined || t.actual !== undefined) {
    if (t.expected !== undefined) lines.push(`  expected: ${clip(t.expected, o.maxValueChars)}`);
    lines.push(`  actual:   ${t.actual === undefined || t.actual === null ? '(nothing)' : t.actual === '' ? '(no output)' : clip(t.actual, o.maxValueChars)}`);
  }
  const showError = t.errorType && !(t.errorType === 'AssertionError' && !t.message) && t.errorType !== 'WrongAnswer';
  if (showError) lines.push(`  ${t.errorType}${t.message ? ': ' + clip(t.message, o.maxValueChars) : ''}`);
  else if (t.errorType === 'AssertionError' && t.expected === undefined) lines.push('  AssertionError');
  if (t.traceback) lines.push('  Traceback (your code):\n' + indent(t.traceback, '  '));
  return lines.join('\n');
}

export function formatFeedback(input: FeedbackInput, opts: Partial<FeedbackOptions> = {}): string {
  const o: FeedbackOptions = { ...DEFAULT_FEEDBACK, ...opts };
  const shown = o.scope === 'visible' ? input.tests.filter((t) => t.visible) : input.tests;
  const k = shown.filter((t) => t.passed).length;
  const parts: string[] = [];
  parts.push(o.scope === 'visible' ? `${k}/${shown.length} visible tests passed.` : `${k}/${shown.length} tests passed.`);
  if (input.syntaxError) {
    const se = input.syntaxError;
    parts.push(`SyntaxError: ${se.message}${se.line ? ` (line ${se.line})` : ''}` + (se.text ? `\n    ${se.text.trim()}` : ''));
  } else if (input.setupError) {
    const e = input.setupError;
    const tOut = e.errorType === 'Timeout';
    parts.push(
      (tOut ? `The program timed out after ${input.testTimeout} s before the tests ran.` : `Error before the tests ran: ${e.errorType}: ${clip(e.message, o.maxValueChars)}`) +
        (e.traceback ? '\nTraceback (your code):\n' + e.traceback : ''),
    );
  } else {
    if (shown.some((t) => t.status === 'timeout' && t.errorType === 'Timeout' && !/^not run/.test(t.message ?? ''))) {
      parts.push(`The program timed out after ${input.testTimeout} s.`);
    }
    const failing = shown.filter((t) => !t.passed && t.errorType !== 'NotRun');
    const notRun = shown.filter((t) => t.errorType === 'NotRun').length;
    for (const t of failing.slice(0, o.maxFailures)) parts.push(describeFailure(t, o, input.testTimeout));
    if (failing.length > o.maxFailures) parts.push(`... and ${failing.length - o.maxFailures} more failing test${failing.length - o.maxFailures === 1 ? '' : 's'}.`);
    if (notRun) parts.push(`${notRun} more test${notRun === 1 ? '' : 's'} did not run because an earlier test timed out.`);
  }
  let text = parts.join('\n\n');
  const tail = '\n... [feedback truncated]';
  if (text.length > o.maxChars) text = text.slice(0, Math.max(0, o.maxChars - tail.length)) + tail;
  return text;
}
