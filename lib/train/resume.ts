// Saved configurations from before a config key existed: one rule for RUN/config.json and a
// checkpoint's config.json alike. A key the saved configuration lacks was added to the schema
// after the run wrote it; the run behaved as that key's schema default (a new key's default
// keeps the old behaviour), so the key is filled in with it. Only keys the file has can
// genuinely differ from the run's; those are compared as before (lib/commands/run-training.ts).
import { CONFIG_KEYS, SCHEMA, type ConfigKey } from '../config/schema.js';

export interface CompletedConfig {
  /** The saved configuration with every schema key present. */
  config: Record<string, unknown>;
  /** The keys it lacked, filled in with their schema defaults, in schema order. */
  filled: ConfigKey[];
}

/** The saved configuration with each schema key it lacks set to the key's default. */
export function withSchemaDefaults(saved: Record<string, unknown>): CompletedConfig {
  const config = { ...saved };
  const filled: ConfigKey[] = [];
  for (const k of CONFIG_KEYS) {
    if (Object.prototype.hasOwnProperty.call(saved, k)) continue;
    config[k] = SCHEMA[k].default;
    filled.push(k);
  }
  return { config, filled };
}

/**
 * The one line a resume logs when saved configurations lacked keys (`filled`: their union), or
 * null when none did.
 */
export function filledKeysNote(filled: Iterable<ConfigKey>): string | null {
  const keys = CONFIG_KEYS.filter((k) => new Set(filled).has(k));
  if (keys.length === 0) return null;
  return `the run's saved configuration predates config key${keys.length > 1 ? 's' : ''} ${keys.map((k) => `"${k}"`).join(', ')}: ` +
    `resuming with ${keys.length > 1 ? 'their defaults' : 'its default'} (${keys.map((k) => `${k} ${JSON.stringify(SCHEMA[k].default)}`).join(', ')})`;
}
