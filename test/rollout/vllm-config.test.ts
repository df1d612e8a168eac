// The vLLM API key as a training config key / flag: reaches the client, never the log or the run directory.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { configOptions, formatConfig, resolveConfig, withoutSecrets } from '../../lib/config/index.js';
import { RESUMABLE_KEYS } from '../../lib/commands/run-training.js';

it('vllmApiKey: a flag (--vllm-api-key), hidden in the printed config, unset in the saved one, given again on resume', () => {
  assert.equal(configOptions()['vllm-api-key']?.type, 'string');
  const c = resolveConfig({ file: null, flags: { backend: 'vllm', serverUrl: 'http://127.0.0.1:8000', model: '/m', vllmApiKey: 'sk-secret' } });
  assert.equal(c.vllmApiKey, 'sk-secret');
  const shown = formatConfig(c);
  assert.ok(!shown.includes('sk-secret'));
  assert.match(shown, /vllmApiKey\s+\(set\)/);
  assert.equal(withoutSecrets(c).vllmApiKey, null);
  assert.equal(c.vllmApiKey, 'sk-secret', 'withoutSecrets copies');
  assert.ok((RESUMABLE_KEYS as readonly string[]).includes('vllmApiKey'));
});
