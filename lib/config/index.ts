// Reading, merging and validating the run configuration: schema defaults < config file
// (YAML or JSON) < command-line flags. Errors name the key, its flag and the allowed values.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { extname } from 'node:path';
import type { Options } from 'yargs';
import { CONFIG_KEYS, DEMO_DEFAULTS, SCHEMA, camel, describeRange, inRange, kebab, type ConfigKey, type KeyDef, type TrainConfig } from './schema.js';

export * from './schema.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Raw = Record<string, unknown>;

function describeAllowed(d: KeyDef): string {
  const nul = d.default === null || d.nullable ? ' (or null)' : '';
  return describeRange(d) + nul;
}

function bad(key: string, d: KeyDef, v: unknown, where: string): never {
  throw new ConfigError(`config key "${key}" (--${kebab(key)})${where ? ` in ${where}` : ''}: must be ${describeAllowed(d)}; got ${JSON.stringify(v) ?? String(v)}`);
}

/** Checks and normalises one value (strings from flags or YAML are converted where unambiguous). */
export function checkValue(key: ConfigKey, v: unknown, where = ''): TrainConfig[ConfigKey] {
  const d = SCHEMA[key];
  if (v === null || v === undefined) {
    if (d.default === null || d.nullable) return null as never;
    bad(key, d, v, where);
  }
  switch (d.type) {
    case 'boolean':
      if (typeof v === 'boolean') return v as never;
      if (v === 'true' || v === 'false') return (v === 'true') as never;
      return bad(key, d, v, where);
    case 'string':
      if (typeof v === 'string' && v.length > 0) return v as never;
      return bad(key, d, v, where);
    case 'enum':
      if (typeof v === 'string' && d.values!.includes(v)) return v as never;
      return bad(key, d, v, where);
    default: {
      const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
      if (typeof n !== 'number' || !inRange(d, n)) return bad(key, d, v, where);
      return n as never;
    }
  }
}

function levenshtein(a: string, b: string): number {
  const dp = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = dp[0]!;
    dp[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = dp[j]!;
      dp[j] = Math.min(dp[j]! + 1, dp[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return dp[b.length]!;
}

/** The known key a (camel/snake/kebab-case) name refers to, or null. */
export function normaliseKey(name: string): ConfigKey | null {
  const k = camel(name);
  return (CONFIG_KEYS as string[]).includes(k) ? (k as ConfigKey) : null;
}

function unknownKey(name: string, where: string): never {
  const k = camel(name);
  const best = CONFIG_KEYS.map((c) => [c, levenshtein(k.toLowerCase(), c.toLowerCase())] as const).sort((a, b) => a[1] - b[1])[0]!;
  const hint = best[1] <= 3 ? ` (did you mean "${best[0]}"?)` : '';
  throw new ConfigError(`unknown config key "${name}"${where ? ` in ${where}` : ''}${hint}; known keys: ${CONFIG_KEYS.join(', ')}`);
}

/** Validates a partial configuration object (from a file or code). Unknown keys are errors. */
export function validatePartial(raw: unknown, where = ''): Partial<TrainConfig> {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new ConfigError(`configuration${where ? ` in ${where}` : ''} must be a mapping of keys to values`);
  }
  const out: Raw = {};
  for (const [name, v] of Object.entries(raw as Raw)) {
    const key = normaliseKey(name) ?? unknownKey(name, where);
    out[key] = checkValue(key, v, where);
  }
  return out as Partial<TrainConfig>;
}

interface YamlModule {
  parse(src: string): unknown;
}

function loadYaml(): YamlModule {
  try {
    return createRequire(import.meta.url)('yaml') as YamlModule;
  } catch {
    throw new ConfigError('reading YAML configuration needs the "yaml" package (npm install yaml), or give the configuration as JSON');
  }
}

/** Parses a YAML (.yaml/.yml) or JSON configuration file into a validated partial configuration. */
export function loadConfigFile(path: string): Partial<TrainConfig> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new ConfigError(`cannot read configuration file ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const ext = extname(path).toLowerCase();
  let raw: unknown;
  try {
    if (ext === '.json') raw = JSON.parse(text);
    else if (ext === '.yaml' || ext === '.yml') raw = loadYaml().parse(text);
    else {
      try {
        raw = JSON.parse(text);
      } catch {
        raw = loadYaml().parse(text);
      }
    }
  } catch (e) {
    if (e instanceof ConfigError) throw e;
    throw new ConfigError(`configuration file ${path} is not valid ${ext === '.json' ? 'JSON' : 'YAML/JSON'}: ${(e as Error).message.split('\n')[0]}`);
  }
  if (raw === null || raw === undefined) return {};
  return validatePartial(raw, path);
}

/** Schema defaults. */
export function defaultConfig(): TrainConfig {
  const c: Raw = {};
  for (const k of CONFIG_KEYS) c[k] = SCHEMA[k].default;
  return c as unknown as TrainConfig;
}

/** Cross-key checks that single-key validation cannot make. */
export function checkConfig(c: TrainConfig): TrainConfig {
  if (c.backend === 'vllm' && !c.serverUrl) throw new ConfigError('config key "serverUrl" (--server-url) is required with backend "vllm"');
  if (c.executor === 'sandboxfusion' && !c.sandboxUrl) throw new ConfigError('config key "sandboxUrl" (--sandbox-url) is required with executor "sandboxfusion"');
  if (c.backend === 'vllm' && !c.model) throw new ConfigError('config key "model" (--model) is required with backend "vllm" (the weights the server starts from)');
  if (c.computeMatched && c.algo !== 'grpo') throw new ConfigError('config key "computeMatched" (--compute-matched) applies to algo "grpo" only');
  if (c.epsilonHigh !== null && c.epsilonHigh < c.epsilon) throw new ConfigError(`config key "epsilonHigh" (--epsilon-high): must be >= epsilon (${c.epsilon}); got ${c.epsilonHigh}`);
  if (c.storage === 'f32' && c.device === 'cpu') {
    throw new ConfigError('config key "storage" (--storage f32) applies to the device engine, and --device cpu was given: the CPU engine computes in f32 already; drop --storage or use --device cuda');
  }
  if (c.intraKeep !== null && c.intraKeep > Math.max(c.numGenerations, c.numFollowUpGenerations ?? c.numGenerations)) {
    throw new ConfigError(`config key "intraKeep" (--intra-keep): must be <= the group size (${c.numGenerations}); got ${c.intraKeep}`);
  }
  return c;
}

/** defaults < file < flags, validated. `flags` holds only keys given on the command line. */
export function resolveConfig(opts: { file?: string | null; flags?: Raw; base?: Partial<TrainConfig> } = {}): TrainConfig {
  const given: Partial<TrainConfig> = { ...(opts.base ?? {}) };
  if (opts.file) Object.assign(given, loadConfigFile(opts.file));
  if (opts.flags) Object.assign(given, validatePartial(opts.flags, 'command-line flags'));
  const demo = (given.model ?? null) === null && (given.dataset ?? null) === null;
  const c = { ...defaultConfig(), ...(demo ? DEMO_DEFAULTS : {}), ...given } as TrainConfig;
  return checkConfig(c);
}

/** yargs options for every key (kebab-case, no defaults so that "not given" is visible). */
export function configOptions(): Record<string, Options> {
  const o: Record<string, Options> = {};
  for (const k of CONFIG_KEYS) {
    const d = SCHEMA[k];
    const def = d.default === null ? 'unset' : String(d.default);
    const demo = k in DEMO_DEFAULTS && DEMO_DEFAULTS[k] !== d.default ? `; demo: ${String(DEMO_DEFAULTS[k])}` : '';
    const opt: Options = { describe: `${d.doc} [default: ${def}${demo}]`, group: `${d.group[0]!.toUpperCase()}${d.group.slice(1)}:` };
    if (d.type === 'boolean') opt.type = 'boolean';
    else if (d.type === 'int' || d.type === 'number') opt.type = 'number';
    else opt.type = 'string';
    if (d.type === 'enum') opt.choices = [...d.values!];
    o[kebab(k)] = opt;
  }
  return o;
}

/**
 * configOptions() of some keys only, under one help group: another command that takes them
 * (eval's --device, --storage, ...) with the same choices, and the same checks through
 * validatePartial.
 */
export function configKeyOptions(keys: readonly ConfigKey[], group: string, describe: Partial<Record<ConfigKey, string>> = {}): Record<string, Options> {
  const all = configOptions();
  return Object.fromEntries(keys.map((k) => {
    const o = all[kebab(k)]!;
    const d = describe[k];
    // another command's wording of what the key does there; the default is the schema's
    return [kebab(k), { ...o, group, ...(d === undefined ? {} : { describe: `${d} [default: ${SCHEMA[k].default === null ? 'unset' : String(SCHEMA[k].default)}]` }) }];
  }));
}

/** Picks the config keys present in parsed yargs argv (camelCase form). */
export function flagsFromArgv(argv: Raw): Raw {
  const out: Raw = {};
  for (const k of CONFIG_KEYS) if (argv[k] !== undefined) out[k] = argv[k];
  return out;
}

/** The configuration as aligned "key: value" lines. */
/** Keys whose values are secrets: never logged, never saved with the run. */
export const SECRET_KEYS: readonly ConfigKey[] = ['vllmApiKey'];

/** The configuration with secret keys unset, as it is saved in RUN/config.json. */
export function withoutSecrets(c: TrainConfig): TrainConfig {
  const o = { ...c } as Record<string, unknown>;
  for (const k of SECRET_KEYS) o[k] = null;
  return o as unknown as TrainConfig;
}

export function formatConfig(c: TrainConfig): string {
  const w = Math.max(...CONFIG_KEYS.map((k) => k.length));
  return CONFIG_KEYS.map((k) => `  ${k.padEnd(w)}  ${SECRET_KEYS.includes(k) && c[k] !== null ? '(set)' : JSON.stringify(c[k])}`).join('\n');
}

/** Markdown table of the demo's defaults. */
export function demoDefaultsMarkdown(): string {
  return Object.entries(DEMO_DEFAULTS).map(([k, v]) => `\`${k}\` = \`${String(v)}\``).join(', ');
}

/** Markdown table of every key (docs/training.md is generated from it). */
export function configTableMarkdown(): string {
  const rows = CONFIG_KEYS.map((k) => {
    const d = SCHEMA[k];
    const allowed = d.type === 'enum' ? d.values!.join(' \\| ') : describeAllowed(d);
    return `| \`${k}\` | \`--${kebab(k)}\` | ${d.default === null ? 'unset' : `\`${String(d.default)}\``} | ${allowed} | ${d.doc.replace(/\|/g, '\\|')} |`;
  });
  return ['| key | flag | default | allowed | meaning |', '|---|---|---|---|---|', ...rows].join('\n');
}
