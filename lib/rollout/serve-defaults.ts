// The serve limits' defaults, apart from the server (lib/rollout/server.ts re-exports them): the
// CLI's option table reads them without loading the server.
/** Defaults of the serve limits (docs/rollout.md). */
export const SERVE_DEFAULTS = {
  maxN: 1024,
  /** Largest work of one request, in tokens (prompt tokens + n x max_tokens, over its prompts). */
  maxRequestTokens: 1 << 20,
  /** Largest total of that over the requests admitted at once (waiting or running). */
  maxQueuedTokens: 1 << 22,
  /** Seconds a client is told to wait when the queue is full. */
  retryAfterSeconds: 1,
} as const;
