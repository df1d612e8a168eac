// `murphy-native serve --model DIR [--port N]`: the native engine as an OpenAI-compatible
// (vLLM-compatible) completion server. See docs/rollout.md.
import { existsSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { Argv, CommandModule } from 'yargs';
import { loadChatTokenizer } from '../prompt/index.js';
import { NativeEngine } from '../rollout/engine.js';
import { startServer, type RolloutServer } from '../rollout/server.js';
import type { TextCodec } from '../rollout/types.js';

export interface ServeArgs {
  model: string;
  port: number;
  host: string;
  servedModelName?: string;
  maxBatch: number;
}

/** Loads the model (and its tokenizer when the directory has one) and starts the server. */
export async function serveModel(a: ServeArgs, log: (msg: string) => void = () => undefined): Promise<RolloutServer> {
  const dir = resolve(a.model);
  const engine = await NativeEngine.load(dir);
  let tokenizer: TextCodec | undefined;
  if (existsSync(join(dir, 'tokenizer.json')) && existsSync(join(dir, 'tokenizer_config.json'))) {
    tokenizer = loadChatTokenizer(dir);
  } else {
    log('no tokenizer files: token-id prompts only, completion text empty');
  }
  const info = engine.model.info;
  const eos = tokenizer?.eosTokenIds ?? (typeof engine.model.hfConfig.eos_token_id === 'number' ? [engine.model.hfConfig.eos_token_id] : []);
  const srv = await startServer({
    engine, tokenizer, eosTokenIds: eos, modelName: a.servedModelName ?? dir, root: dir, host: a.host, port: a.port,
    maxBatchRequests: a.maxBatch,
    onLoad: (d, s) => log(`loaded weights from ${d} in ${s.toFixed(2)} s`),
  });
  log(`serving ${basename(dir)} (${info.modelType}, ${info.numLayers} layers, vocab ${info.vocabSize}) as '${a.servedModelName ?? dir}' on ${srv.url}`);
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
    .option('max-batch', { type: 'number', default: 64, describe: 'Most concurrent requests merged into one engine call' }) as unknown as Argv<ServeArgs>,
  handler: async (argv) => {
    const log = (m: string) => process.stderr.write(`murphy-native serve: ${m}\n`);
    const srv = await serveModel(argv, log);
    await new Promise<void>((done) => {
      const stop = () => {
        log('shutting down');
        void srv.close().then(done);
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
  },
};
