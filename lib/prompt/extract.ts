// Extracting code from model completions (docs/method.md §7).

export interface ExtractOptions {
  /** Which fenced block to use when there are several: the last (default) or the longest. */
  pick?: 'last' | 'longest';
  /**
   * Fence languages accepted, lower-case; '' is an untagged fence. Default
   * ['python', 'py', 'python3', 'py3', '']. Blocks in other languages (bash, text, ...) are ignored.
   */
  languages?: readonly string[];
  /** Remove <think>…</think> sections first (and an unterminated one to the end). Default true. */
  stripThinking?: boolean;
  /** Without fences, accept the whole text when it looks like Python code. Default true. */
  allowUnfenced?: boolean;
  /**
   * HumanEval-style prompt (signature + docstring). When the extracted code is a
   * continuation (its first non-empty line is indented), the result is prefix + code.
   */
  prefix?: string;
}

export interface CodeBlock {
  lang: string;
  code: string;
  /** False when the closing fence was missing (block runs to the end of the text). */
  terminated: boolean;
}

const DEFAULT_LANGS = ['python', 'py', 'python3', 'py3', ''];

/** Removes reasoning: <think>…</think> sections, an unterminated <think> to the end, and a leading "…</think>" whose opening tag was in the prompt. */
export function stripThinking(text: string): string {
  if (!text.includes('think>')) return text;
  let s = text;
  const close = s.indexOf('</think>');
  const open = s.indexOf('<think>');
  if (close !== -1 && (open === -1 || close < open)) s = s.slice(close + '</think>'.length);
  s = s.replace(/<think>[\s\S]*?<\/think>/g, '');
  const dangling = s.indexOf('<think>');
  if (dangling !== -1) s = s.slice(0, dangling);
  return s;
}

function isFenceChar(c: number): boolean {
  return c === 96 /* ` */ || c === 126 /* ~ */;
}

/** Index of the first non-blank (space/tab) character of the line starting at `from`. */
function skipBlank(text: string, from: number, end: number): number {
  let i = from;
  while (i < end) {
    const c = text.charCodeAt(i);
    if (c !== 32 && c !== 9) break;
    i++;
  }
  return i;
}

function isSpace(c: number): boolean {
  return c === 32 || c === 9 || c === 13 || c === 12 || c === 11;
}

function allChar(text: string, from: number, to: number, c: number): boolean {
  for (let i = from; i < to; i++) if (text.charCodeAt(i) !== c) return false;
  return true;
}

interface RawBlock {
  lang: string;
  /** Body range [start, end) in the text, without the fences. */
  start: number;
  end: number;
  terminated: boolean;
}

// Opening fence line, matched in place (sticky) from a line start.
const OPEN_LINE_RE = /[ \t]*(`{3,}|~{3,})[ \t]*([^\s`]*)[^`\n]*$/my;

/** Fenced blocks as ranges of `text` (no slicing). */
function scanBlocks(text: string): RawBlock[] {
  const blocks: RawBlock[] = [];
  const n = text.length;
  let pos = 0;
  while (pos <= n) {
    let eol = text.indexOf('\n', pos);
    if (eol < 0) eol = n;
    const first = skipBlank(text, pos, eol);
    const c0 = text.charCodeAt(first);
    if (first + 2 < eol && isFenceChar(c0) && text.charCodeAt(first + 1) === c0 && text.charCodeAt(first + 2) === c0) {
      OPEN_LINE_RE.lastIndex = pos;
      const m = OPEN_LINE_RE.exec(text);
      if (m) {
        const fence = m[1]!;
        const lang = m[2]!.toLowerCase();
        const bodyStart = eol + 1;
        let bodyEnd = n;
        let next = n + 1;
        let terminated = false;
        const fl = fence.length;
        const fc = fence.charCodeAt(0);
        let lp = bodyStart;
        while (lp <= n && bodyStart <= n) {
          let le = text.indexOf('\n', lp);
          if (le < 0) le = n;
          const ls = skipBlank(text, lp, le);
          let te = le;
          while (te > ls && isSpace(text.charCodeAt(te - 1))) te--;
          if (te - ls >= fl && text.charCodeAt(ls) === fc && allChar(text, ls, te, fc)) {
            bodyEnd = lp - 1;
            next = le + 1;
            terminated = true;
            break;
          }
          // A closing fence glued to the last code line: "    return x```".
          if (te - ls > fl && allChar(text, te - fl, te, fc) && text.charCodeAt(te - fl - 1) !== fc) {
            bodyEnd = te - fl;
            next = le + 1;
            terminated = true;
            break;
          }
          lp = le + 1;
        }
        const start = Math.min(bodyStart, n);
        blocks.push({ lang, start, end: Math.max(start, bodyEnd), terminated });
        pos = next;
        continue;
      }
    }
    pos = eol + 1;
  }
  return blocks;
}

/** All fenced code blocks (``` or ~~~, any length >= 3), in order. */
export function findCodeBlocks(text: string): CodeBlock[] {
  return scanBlocks(text).map((b) => ({ lang: b.lang, code: text.slice(b.start, b.end), terminated: b.terminated }));
}

// Result of trimRange (module-level to avoid allocating a pair).
let trimStart = 0;
let trimEnd = 0;

/** Range of text[start, end) without leading blank lines and trailing whitespace. */
function trimRange(text: string, start: number, end: number): void {
  let s = start;
  let i = start;
  while (i < end) {
    const c = text.charCodeAt(i);
    if (c === 10) s = i + 1;
    else if (c !== 32 && c !== 9 && c !== 13) break;
    i++;
  }
  if (i >= end) s = end;
  let e = end;
  while (e > s && (isSpace(text.charCodeAt(e - 1)) || text.charCodeAt(e - 1) === 10)) e--;
  trimStart = s;
  trimEnd = e;
}

const CODE_LINE_RE = /^(?:def |async def |class |import |from [\w.]+ import |@\w|if __name__|[A-Za-z_]\w* ?=|print\()/m;

function firstLineIndented(code: string): boolean {
  for (const line of code.split('\n')) {
    if (line.trim() === '') continue;
    return /^[ \t]/.test(line);
  }
  return false;
}

/** Drops leading blank lines and trailing whitespace. */
function trimBlankEdges(code: string): string {
  let start = 0;
  let i = 0;
  while (i < code.length) {
    const c = code.charCodeAt(i);
    if (c === 10) start = i + 1;
    else if (c !== 32 && c !== 9 && c !== 13) break;
    i++;
  }
  let end = code.length;
  while (end > start && (isSpace(code.charCodeAt(end - 1)) || code.charCodeAt(end - 1) === 10)) end--;
  return start === 0 && end === code.length ? code : code.slice(start, end);
}

/**
 * Code from a completion, or null when there is none: thinking removed, then the last (or
 * longest) fenced block in an accepted language; without fences, the whole text if it looks
 * like code (or is an indented continuation and a prefix is given). With a HumanEval-style
 * prefix, continuations are completed as prefix + code.
 */
export function extractCode(text: string, options: ExtractOptions = {}): string | null {
  const langs = options.languages ?? DEFAULT_LANGS;
  let s = options.stripThinking === false ? text : stripThinking(text);
  if (s.includes('\r')) s = s.replace(/\r\n/g, '\n');
  let code: string | null = null;
  let found = false;
  let bs = 0;
  let be = 0;
  const longest = options.pick === 'longest';
  for (const b of scanBlocks(s)) {
    if (!langs.includes(b.lang)) continue;
    trimRange(s, b.start, b.end);
    if (trimEnd <= trimStart) continue; // blank block
    if (!found || !longest || trimEnd - trimStart > be - bs) {
      bs = trimStart;
      be = trimEnd;
    }
    found = true;
  }
  if (found) {
    if (options.prefix !== undefined && firstLineIndented(s.slice(bs, be))) {
      const p = options.prefix.endsWith('\n') ? options.prefix : options.prefix + '\n';
      return p + s.slice(bs, be) + '\n';
    }
    // One slice, ending with the newline that follows the code when there is one.
    return s.charCodeAt(be) === 10 ? s.slice(bs, be + 1) : s.slice(bs, be) + '\n';
  } else if ((options.allowUnfenced ?? true) && !/^[ \t]*(?:`{3,}|~{3,})/m.test(s)) {
    const body = s.replace(/^(?:[ \t]*\n)+/, '');
    if (CODE_LINE_RE.test(body) || (options.prefix !== undefined && firstLineIndented(body) && body.trim() !== '')) code = body;
  }
  if (code === null) return null;
  if (options.prefix !== undefined && firstLineIndented(code)) {
    const p = options.prefix.endsWith('\n') ? options.prefix : options.prefix + '\n';
    return p + trimBlankEdges(code) + '\n';
  }
  const out = trimBlankEdges(code);
  return out === '' ? null : out + '\n';
}

/** The tree builder's code extractor for chat models: extractCode over a completion's text. */
export function extractFromCompletion(completion: { text: string }): string | null {
  return extractCode(completion.text);
}
