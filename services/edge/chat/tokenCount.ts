import { countTokens as countO200k } from "gpt-tokenizer/encoding/o200k_base";

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

export function countTokens(text: string): number {
  const exact = Math.min(text.length, EXACT_CHARS);
  let tokens = 0;
  for (let at = 0; at < exact; at += SLICE) tokens += countO200k(text.slice(at, Math.min(at + SLICE, exact)));
  return extrapolate(tokens, exact, text.length);
}

/** `tokens` counted over the first `counted` characters, taken at the same rate over `total` characters. */
export const extrapolate = (tokens: number, counted: number, total: number): number =>
  counted >= total || counted === 0 ? tokens : Math.ceil((tokens * total) / counted);
