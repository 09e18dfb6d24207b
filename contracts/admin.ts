import { z } from "zod";

/** An operator's admin token, stored under `hash.<sha256 of token>` in `admin_tokens`; the token itself never is. */
export const AdminTokenRecord = z.object({
  tokenId: z.string(),
  /** Who holds it: the actor named on every change made with it. */
  name: z.string(),
  createdAt: z.string(),
});
export type AdminTokenRecord = z.infer<typeof AdminTokenRecord>;

/** Stored under `id.<tokenId>`: lets an operator list and revoke tokens without knowing them. */
export const AdminTokenIndexEntry = AdminTokenRecord.extend({ tokenHash: z.string() });
export type AdminTokenIndexEntry = z.infer<typeof AdminTokenIndexEntry>;

export const AdminTokenName = z.string().regex(/^[A-Za-z0-9_. @-]{1,64}$/, "admin token names are 1-64 characters of letters, digits, space, _ . @ and -");

/** One change made through the admin API, on `adminlog.<action>` (stream ADMIN_LOG): who did what to whom. */
export const AdminAction = z.object({
  at: z.string(),
  /** The admin token's name. */
  actor: z.string(),
  action: z.enum(["account.create", "account.credit", "account.credit_limit", "key.create", "key.revoke"]),
  /** The account or key acted on. */
  target: z.string(),
  detail: z.record(z.string(), z.union([z.string(), z.number()])).optional(),
});
export type AdminAction = z.infer<typeof AdminAction>;
