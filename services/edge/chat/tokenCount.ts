import { createRequire } from "node:module";
import type * as O200k from "gpt-tokenizer/encoding/o200k_base";

const requireModule = createRequire(import.meta.url);
let o200kCount: typeof O200k.countTokens | undefined;

/**
 * The tokenizer, loaded at the first count: building its table of 200,000 tokens takes about 0.15 s of CPU
 * (0.43 s on a slow day), which every process with an edge paid at start, chatting or not (each test app and
 * child process, every `npm start`). A process's first chat request waits for it instead, once. Loaded with
 * `require` so that counting stays synchronous: an `import()` would hold the thread as long while the module
 * evaluates, and make every count asynchronous.
 */
function countO200k(text: string): number {
  o200kCount ??= (requireModule("gpt-tokenizer/encoding/o200k_base") as typeof O200k).countTokens;
  return o200kCount(text);
}

/**
 * Tokens of a text as OpenAI's current models count them (o200k_base, gpt-tokenizer), for what reelay has
 * to count itself: a prompt's reservation, and the answer relayed when the upstream reports no usage.
 *
 * The tokenizer's cost grows faster than linearly in a run without spaces (16 KiB of one letter took about
 * 0.4 s here), and prompts are the client's to choose: so text is counted in slices of SLICE characters,
 * and past EXACT characters the rest is taken at the rate counted so far. A slice boundary can split a word
 * (a token or so more per slice), which errs towards counting more, never towards free.
 */
const SLICE = 512;
/** Characters counted exactly; beyond them, extrapolated. At worst about 25 ms here (rare CJK characters), well under 1 ms for prose. */
export const EXACT_CHARS = 4096;
/**
 * Characters of one prompt counted exactly, over all its texts (messages, names, tool calls and definitions):
 * a body of 1 MiB may hold hundreds of texts of EXACT_CHARS each, and counting each one exactly blocked the
 * edge's thread for about a second per request (every tenant's requests waited). At worst about 25 ms here.
 */
export const PROMPT_EXACT_CHARS = 8192;

/**
 * Counts the texts of one request within one budget of exactly counted characters: each text is counted
 * exactly while the budget lasts; what is left of it then is taken at the rate the request's counted text
 * had (its own start included).
 */
export class TokenBudget {
  private left: number;
  private countedChars = 0;
  private countedTokens = 0;

  constructor(exactChars: number) {
    this.left = exactChars;
  }

  /** Characters counted exactly so far. */
  get exactChars(): number {
    return this.countedChars;
  }

  count(text: string): number {
    const exact = Math.min(text.length, this.left);
    let tokens = 0;
    for (let at = 0; at < exact; at += SLICE) tokens += countO200k(text.slice(at, Math.min(at + SLICE, exact)));
    this.left -= exact;
    this.countedChars += exact;
    this.countedTokens += tokens;
    if (exact === text.length) return tokens;
    return tokens + extrapolate(this.countedTokens, this.countedChars, this.countedChars + text.length - exact) - this.countedTokens;
  }
}

export function countTokens(text: string): number {
  return new TokenBudget(EXACT_CHARS).count(text);
}

/** `tokens` counted over the first `counted` characters, taken at the same rate over `total` characters. */
export const extrapolate = (tokens: number, counted: number, total: number): number =>
  counted >= total || counted === 0 ? tokens : Math.ceil((tokens * total) / counted);
