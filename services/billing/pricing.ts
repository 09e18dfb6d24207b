import { MICROS_PER_YUAN } from "../../contracts/ledger.ts";

/**
 * Cost of tokens at a price in yuan per 1,000,000 tokens, in micro-yuan, rounded half up to the
 * nearest micro-yuan — once, on the total. The same function prices reservations, settlements and chat.
 * BigInt keeps tokens × price exact far beyond 2^53.
 */
export function costMicros(parts: ReadonlyArray<{ tokens: number; pricePerMillionTokens: number }>): number {
  let numerator = 0n;
  for (const { tokens, pricePerMillionTokens } of parts) {
    numerator += BigInt(tokens) * BigInt(Math.round(pricePerMillionTokens * MICROS_PER_YUAN));
  }
  const million = 1_000_000n;
  return Number((numerator + million / 2n) / million);
}

/** "12.5" or "3" yuan → micro-yuan, exactly; refuses more than 6 decimal places or anything not a positive amount. */
export function parseYuan(text: string): number {
  const match = /^(\d{1,12})(?:\.(\d{1,6}))?$/.exec(text.trim());
  if (!match) throw new Error(`amount must be yuan with up to 6 decimal places, e.g. 100 or 12.345678 (got "${text}")`);
  const micros = Number(match[1]) * MICROS_PER_YUAN + Number((match[2] ?? "").padEnd(6, "0"));
  if (micros <= 0) throw new Error("amount must be greater than zero");
  // Beyond 2^53 µ¥ the sum above is no longer exact and the ledger's schema refuses it anyway.
  if (!Number.isSafeInteger(micros)) throw new Error(`amount is too large (at most ${formatYuan(Number.MAX_SAFE_INTEGER)} yuan)`);
  return micros;
}

/** Micro-yuan → "5.009400" (always six places: what the ledger holds, nothing rounded away). */
export function formatYuan(micros: number): string {
  const sign = micros < 0 ? "-" : "";
  const abs = Math.abs(micros);
  return `${sign}${Math.floor(abs / MICROS_PER_YUAN)}.${String(abs % MICROS_PER_YUAN).padStart(6, "0")}`;
}
