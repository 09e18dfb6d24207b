import { z } from "zod";
import { MAX_BELIEVABLE_TOKENS } from "../../../../contracts/chat.ts";

/**
 * A number a vendor may send as a string (`"SR": "720"` from DashScope-hosted models, Kling's `"duration":
 * "5.0"`): read either way, so a usage field's type never stalls a task (new-api issue #4130).
 */
export const lenientNumber = z.preprocess((value) => (typeof value === "string" && value.trim() !== "" ? Number(value) : value), z.number().nonnegative());

export const lenientInt = z.preprocess((value) => (typeof value === "string" && value.trim() !== "" ? Number(value) : value), z.number().int().nonnegative());

/**
 * A token count a vendor reports: one past what any video could be billed is its bug, and is read as no count
 * (the estimate is charged) rather than moved as money past what the ledger can hold.
 */
export const lenientTokens = lenientInt.transform((count) => (count <= MAX_BELIEVABLE_TOKENS ? count : undefined));
