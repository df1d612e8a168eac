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
const OPEN_RE = /^[ \t]*(`{3,}|~{3,})[ \t]*([^\s`]*)[^`]*$/;

/** Removes reasoning: <think>…</think> sections, an unterminated <think> to the end, and a leading "…</think>" whose opening tag was in the prompt. */
export function stripThinking(text: string): string {
  let s = text;
  const close = s.indexOf('</think>');
  const open = s.indexOf('<think>');
  if (close !== -1 && (open === -1 || close < open)) s = s.slice(close + '</think>'.length);
  s = s.replace(/<think>[\s\S]*?<\/think>/g, '');
  const dangling = s.indexOf('<think>');
  if (dangling !== -1) s = s.slice(0, dangling);
  return s;
}

/** All fenced code blocks (``` or ~~~, any length >= 3), in order. */
export function findCodeBlocks(text: string): CodeBlock[] {
  const lines = text.split('\n');
  const blocks: CodeBlock[] = [];
  let i = 0;
  while (i < lines.length) {
    const m = OPEN_RE.exec(lines[i]!);
    if (!m) {
      i++;
      continue;
    }
    const fence = m[1]!;
    const ch = fence[0]!;
    const lang = m[2]!.toLowerCase();
    const body: string[] = [];
    let terminated = false;
    let j = i + 1;
    for (; j < lines.length; j++) {
      const line = lines[j]!;
      const t = line.trim();
      if (t.length >= fence.length && t.startsWith(fence) && [...t].every((c) => c === ch)) {
        terminated = true;
        break;
      }
      // A closing fence glued to the last code line: "    return x```".
      const trimmedEnd = line.trimEnd();
      if (trimmedEnd.endsWith(fence) && !trimmedEnd.endsWith(ch.repeat(fence.length + 1)) && trimmedEnd.length > fence.length) {
        body.push(trimmedEnd.slice(0, -fence.length));
        terminated = true;
        break;
      }
      body.push(line);
    }
    blocks.push({ lang, code: body.join('\n'), terminated });
    i = j + 1;
  }
  return blocks;
}

const CODE_LINE_RE = /^(?:def |async def |class |import |from [\w.]+ import |@\w|if __name__|[A-Za-z_]\w* ?=|print\()/m;

function firstLineIndented(code: string): boolean {
  for (const line of code.split('\n')) {
    if (line.trim() === '') continue;
    return /^[ \t]/.test(line);
  }
  return false;
}

function trimBlankEdges(code: string): string {
  return code.replace(/^(?:[ \t]*\n)+/, '').replace(/\s+$/, '');
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
  s = s.replace(/\r\n/g, '\n');
  const blocks = findCodeBlocks(s).filter((b) => langs.includes(b.lang) && b.code.trim() !== '');
  let code: string | null = null;
  if (blocks.length > 0) {
    let chosen = blocks[blocks.length - 1]!;
    if (options.pick === 'longest') {
      for (const b of blocks) if (b.code.trim().length > chosen.code.trim().length) chosen = b;
    }
    code = chosen.code;
  } else if ((options.allowUnfenced ?? true) && !/^[ \t]*(?:`{3,}|~{3,})/m.test(s)) {
    const body = s.replace(/^(?:[ \t]*\n)+/, '');
    if (CODE_LINE_RE.test(body) || (options.prefix !== undefined && firstLineIndented(body) && body.trim() !== '')) code = body;
  }
  if (code === null) return null;
  if (options.prefix !== undefined && firstLineIndented(code)) {
    const p = options.prefix.endsWith('\n') ? options.prefix : options.prefix + '\n';
    return p + code.replace(/^(?:[ \t]*\n)+/, '').replace(/\s+$/, '') + '\n';
  }
  const out = trimBlankEdges(code);
  return out === '' ? null : out + '\n';
}
