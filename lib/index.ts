// murphy-native: the public library API.
// Each area re-exports its public surface here; see README.md for an overview.
export * from './native.js';
export * from './murphy/index.js';
export * from './prompt/index.js';
export * from './exec/index.js';
export * from './data/index.js';
export * from './rollout/index.js';
