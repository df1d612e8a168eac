// `murphy-native serve --model DIR [--port N]`: the native engine as an OpenAI-compatible
// (vLLM-compatible) server. See docs/rollout.md.
import { existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { Argv, CommandModule } from 'yargs';
import type { PolicyModel } from '../model/index.js';
import type { RolloutServer } from '../rollout/server.js';
import { SERVE_DEFAULTS } from '../rollout/serve-defaults.js';
import type { RolloutEngine, TextCodec } from '../rollout/types.js';
import { KV_CACHE_DEFAULTS } from '../rollout/paged/kv-defaults.js';

export interface ServeArgs {
  model: string;
  port: number;
  host: string;
  servedModelName?: string;
  maxBatch: number;
  /** Default: MURPHY_API_KEY. */
  apiKey?: string;
  /** Serve /collective_rpc. Default true. */
  weightSync?: boolean;
  maxRequestTokens?: number;
  maxQueuedTokens?: number;
  /** Generate on a bf16 copy of the weights (docs/model.md, "bf16 weights"). Default false. */
  bf16Generate?: boolean;
  /** cpu (default): the CPU engine; cuda / emulate: the device engine with the paged engine (docs/rollout.md, "Colocated mode"). */
  device?: 'cpu' | 'cuda' | 'emulate';
  /** Device engines: share of the free device memory the KV cache takes (default KV_CACHE_DEFAULTS'), or its size in blocks. */
  kvCacheFraction?: number;
  kvCacheBlocks?: number;
}

export const SERVE_DEVICES = ['cpu', 'cuda', 'emulate'] as const;

/** The model and the engine that serves it: NativeEngine on the CPU, the paged engine on a device engine. */
async function loadEngine(dir: string, a: ServeArgs, log: (msg: string) => void): Promise<{ engine: RolloutEngine; model: PolicyModel }> {
  const device = a.device ?? 'cpu';
  if (!(SERVE_DEVICES as readonly string[]).includes(device)) throw new Error(`--device must be one of ${SERVE_DEVICES.join(', ')}, got '${String(device)}'`);
  const { loadRolloutEngine } = await import('./rollout-engine.js');
  return loadRolloutEngine(dir, { device, storage: 'bf16', bf16Generate: a.bf16Generate, releaseHeap: true, kvCacheFraction: a.kvCacheFraction, kvCacheBlocks: a.kvCacheBlocks }, log);
}

/** Seconds SIGTERM/SIGINT wait for generation to stop before the process exits anyway. */
const STOP_GRACE_SECONDS = 10;

function positiveInt(v: number | undefined, flag: string): number | undefined {
  if (v === undefined) return undefined;
  if (!Number.isSafeInteger(v) || v < 1) throw new Error(`${flag} must be a positive integer, got ${String(v)}`);
  return v;
}

/** Loads the model (and its tokenizer when the directory has one) and starts the server. */
export async function serveModel(a: ServeArgs, log: (msg: string) => void = () => undefined): Promise<RolloutServer> {
  const maxBatch = positiveInt(a.maxBatch, '--max-batch');
  const maxRequestTokens = positiveInt(a.maxRequestTokens, '--max-request-tokens');
  const maxQueuedTokens = positiveInt(a.maxQueuedTokens, '--max-queued-tokens');
  const apiKey = a.apiKey ?? (process.env.MURPHY_API_KEY || undefined);
  const dir = resolve(a.model);
  if (a.kvCacheFraction !== undefined && !(a.kvCacheFraction > 0 && a.kvCacheFraction <= 1)) throw new Error(`--kv-cache-fraction must be in (0, 1], got ${a.kvCacheFraction}`);
  positiveInt(a.kvCacheBlocks, '--kv-cache-blocks');
  const { engine, model } = await loadEngine(dir, a, log);
  // the server and the tokenizer load with the engine, not with the CLI's command list
  const [{ loadChatTokenizer }, { startServer }] = await Promise.all([import('../prompt/index.js'), import('../rollout/server.js')]);
  let tokenizer: TextCodec | undefined;
  if (existsSync(join(dir, 'tokenizer.json')) && existsSync(join(dir, 'tokenizer_config.json'))) {
    tokenizer = loadChatTokenizer(dir);
  } else {
    log('no tokenizer files: token-id prompts only, completion text empty, no chat');
  }
  const info = model.info;
  const eos = tokenizer?.eosTokenIds ?? (typeof model.hfConfig.eos_token_id === 'number' ? [model.hfConfig.eos_token_id] : []);
  const srv = await startServer({
    engine, tokenizer, eosTokenIds: eos, modelName: a.servedModelName ?? dir, root: dir, host: a.host, port: a.port,
    maxBatchRequests: maxBatch, apiKey, weightSync: a.weightSync, maxRequestTokens, maxQueuedTokens,
    onLoad: (d, s) => log(`loaded weights from ${d} in ${s.toFixed(2)} s`),
  });
  log(`serving ${basename(dir)} (${info.modelType}, ${info.numLayers} layers, vocab ${info.vocabSize}) as '${a.servedModelName ?? dir}' on ${srv.url}` +
    (apiKey === undefined ? '' : ' (API key required)') + (a.bf16Generate ? ' with bf16 weights' : '') + (a.device !== undefined && a.device !== 'cpu' ? ` on device '${a.device}'` : ''));
  return srv;
}

export const serveCommand: CommandModule<object, ServeArgs> = {
  command: 'serve',
  describe: 'Serve a model with the native engine over an OpenAI-compatible (vLLM-compatible) HTTP API',
  builder: (y) => y
    .option('model', { type: 'string', demandOption: true, describe: 'Hugging Face model directory (config.json + safetensors)' })
    .option('port', { type: 'number', default: 8000, describe: 'Port (0 = any free port)' })
    .option('host', { type: 'string', default: '127.0.0.1', describe: 'Address to listen on' })
    .option('served-model-name', { type: 'string', describe: 'Model name in the API (default: the directory path, as vLLM does)' })
    .option('max-batch', { type: 'number', default: 64, describe: 'Most concurrent requests merged into one engine call' })
    .option('api-key', { type: 'string', describe: 'Require `Authorization: Bearer KEY` on every route but /health (default: $MURPHY_API_KEY)' })
    .option('weight-sync', { type: 'boolean', default: true, describe: 'Serve /collective_rpc (weight loading); needs --api-key on a non-loopback --host' })
    .option('max-request-tokens', { type: 'number', default: SERVE_DEFAULTS.maxRequestTokens, describe: 'Largest work of one request in tokens: prompt tokens + n x max_tokens, over its prompts (400 beyond it)' })
    .option('bf16-generate', { type: 'boolean', default: false, describe: 'Generate on a bf16 copy of the weights (vdpbf16ps where the CPU has it); docs/model.md, "bf16 weights"' })
    .option('device', { type: 'string', choices: SERVE_DEVICES, default: 'cpu', describe: 'cpu: the CPU engine; cuda: the device engine with paged KV cache and continuous batching (not yet run on a GPU); emulate: the same on the CPU harness (tests, slow)' })
    .option('kv-cache-fraction', { type: 'number', describe: `--device cuda|emulate: share of the free device memory the KV cache takes (default ${KV_CACHE_DEFAULTS.kvCacheFraction})` })
    .option('kv-cache-blocks', { type: 'number', describe: '--device cuda|emulate: the KV cache size in blocks of 16 tokens (instead of --kv-cache-fraction)' })
    .option('max-queued-tokens', { type: 'number', default: SERVE_DEFAULTS.maxQueuedTokens, describe: 'Largest total of that over requests admitted at once (503 + Retry-After beyond it)' }) as unknown as Argv<ServeArgs>,
  handler: async (argv) => {
    const log = (m: string) => process.stderr.write(`murphy-native serve: ${m}\n`);
    const srv = await serveModel(argv, log);
    await new Promise<void>((done) => {
      let stopping = false;
      const stop = (signal: NodeJS.Signals) => {
        if (stopping) {
          log(`${signal} again: exiting now`);
          process.exit(signal === 'SIGINT' ? 130 : 143);
        }
        stopping = true;
        log(`${signal}: stopping generation and shutting down`);
        // generation stops at the next decode step; this only guards against a stuck native call
        setTimeout(() => {
          log(`generation did not stop within ${STOP_GRACE_SECONDS} s: exiting anyway`);
          process.exit(1);
        }, STOP_GRACE_SECONDS * 1000).unref();
        void srv.close().then(done);
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
    });
  },
};
