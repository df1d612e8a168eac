// Prompt layer: chat templates, tokenization, multi-turn prompt assembly, code extraction.
export { extractCode, extractFromCompletion, findCodeBlocks, stripThinking, type CodeBlock, type ExtractOptions } from './extract.js';
export {
  HfChatTokenizer,
  loadChatTokenizer,
  qwen3TokenizerDir,
  type ChatMessage,
  type ChatTokenizer,
  type RenderOptions,
} from './tokenizer.js';
export { ChatPromptBuilder, defaultFeedbackMessage, type ChatPromptOptions, type HistoryMode } from './chat.js';
