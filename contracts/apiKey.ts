import { z } from "zod";

/** Stored under `hash.<sha256 of key>`: what a request's key resolves to. The key itself is never stored. */
export const ApiKeyRecord = z.object({
  keyId: z.string(),
  account: z.string(),
  createdAt: z.string(),
});
export type ApiKeyRecord = z.infer<typeof ApiKeyRecord>;

/** Stored under `id.<keyId>`: lets an operator list and revoke keys without knowing them. */
export const ApiKeyIndexEntry = ApiKeyRecord.extend({ keyHash: z.string() });
export type ApiKeyIndexEntry = z.infer<typeof ApiKeyIndexEntry>;

export const AccountName = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, "account names are 1-64 characters of letters, digits, _ and -");
