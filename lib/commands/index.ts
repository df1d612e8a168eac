// The list of CLI commands. Add a module here to expose it as `murphy-native <name>`.
import type { CommandModule } from 'yargs';
import { doctorCommand } from './doctor.js';
import { initModelCommand } from './init-model.js';
import { memoryPlanCommand } from './memory-plan.js';
import { serveCommand } from './serve.js';
import { trainCommand } from './train.js';
import { evalCommand } from './eval.js';
import { reportCommand } from './report.js';
import { verifyDatasetCommand } from './verify-dataset.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export const commands: CommandModule<any, any>[] = [
  doctorCommand,
  verifyDatasetCommand,
  initModelCommand,
  serveCommand,
  trainCommand,
  evalCommand,
  reportCommand,
  memoryPlanCommand,
];
