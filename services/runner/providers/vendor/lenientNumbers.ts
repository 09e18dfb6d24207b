import { z } from "zod";

/**
 * A number a vendor may send as a string (`"SR": "720"` from DashScope-hosted models, Kling's `"duration":
 * "5.0"`): read either way, so a usage field's type never stalls a task (new-api issue #4130).
 */
export const lenientNumber = z.preprocess((value) => (typeof value === "string" && value.trim() !== "" ? Number(value) : value), z.number().nonnegative());

export const lenientInt = z.preprocess((value) => (typeof value === "string" && value.trim() !== "" ? Number(value) : value), z.number().int().nonnegative());
