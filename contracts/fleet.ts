import { z } from "zod";

/**
 * What the fleet shares about its vendor channels and API keys' request rates, in the KV bucket `fleet`
 * (per-message TTL, so records of a process that died age out by themselves). Every record carries the time
 * it stops counting (`until`, epoch ms) beside its TTL: a reader decides by it, the TTL only cleans up.
 *
 * Keys (channel names and key ids as subject tokens, `fleetToken`):
 * - `chan.<c>.blocks`            every runner's block of the channel's `maxInFlight` slots (sizes sum to at most maxInFlight)
 * - `chan.<c>.cooldown`          the channel is out of rotation until `until` (its key, quota or account was refused)
 * - `chan.<c>.submits`           when the channel's next submit may go (spacing of `submitsPerSecond`) and the last ones
 * - `chan.<c>.wait.<r>.<a>`      runner r holds `count` tasks of account a waiting for a slot on c
 * - `chan.<c>.errors`            the channel's recent errors and failed clean-ups
 * - `chan.<c>.policy`            the channel's kind and limits, as its runners are configured
 * - `rate.<keyId>`               the token bucket of one API key, shared by every edge
 */

export const FLEET_BUCKET = "fleet";

/** A name as one subject token: kept when it is one already (the usual case), else hex-encoded behind `x`. */
export const fleetToken = (name: string): string => (/^[A-Za-z0-9_-]{1,64}$/.test(name) ? name : `x${Buffer.from(name).toString("hex")}`);

export const fleetKeys = {
  channels: "chan.>",
  channel: (channel: string) => `chan.${fleetToken(channel)}`,
  blocks: (channel: string) => `chan.${fleetToken(channel)}.blocks`,
  cooldown: (channel: string) => `chan.${fleetToken(channel)}.cooldown`,
  submits: (channel: string) => `chan.${fleetToken(channel)}.submits`,
  wait: (channel: string, runner: string, account: string) => `chan.${fleetToken(channel)}.wait.${fleetToken(runner)}.${fleetToken(account)}`,
  errors: (channel: string) => `chan.${fleetToken(channel)}.errors`,
  policy: (channel: string) => `chan.${fleetToken(channel)}.policy`,
  rate: (keyId: string) => `rate.${fleetToken(keyId)}`,
} as const;

const time = z.number().int().nonnegative();

/**
 * One runner's block of a channel's slots: `size` slots it may hand its tasks without asking the fleet, of
 * which `inUse` are held now (`byAccount`: per account), as of its last refresh; it counts until `until`.
 */
export const Block = z.object({ size: z.number().int().nonnegative(), inUse: z.number().int().nonnegative(), byAccount: z.record(z.string(), z.number().int().nonnegative()), until: time });
export type Block = z.infer<typeof Block>;

/** Every runner's block of one channel, in one record: each change is a write guarded by its revision. */
export const BlocksRecord = z.object({ channel: z.string(), blocks: z.record(z.string(), Block) });
export type BlocksRecord = z.infer<typeof BlocksRecord>;

export const CooldownRecord = z.object({ channel: z.string(), until: time, why: z.string(), by: z.string() });
export type CooldownRecord = z.infer<typeof CooldownRecord>;

/** `recent`: the times (epoch ms) of the channel's last submits, for the observed rate. */
export const SubmitsRecord = z.object({ channel: z.string(), nextAt: time, recent: z.array(time).max(100) });
export type SubmitsRecord = z.infer<typeof SubmitsRecord>;

/** `since`: when the oldest of these tasks began to wait; `servedAt`: when this runner last gave the account a slot there (0: not lately). */
export const WaitRecord = z.object({ channel: z.string(), runner: z.string(), account: z.string(), count: z.number().int().nonnegative(), since: time, servedAt: time.default(0), until: time });
export type WaitRecord = z.infer<typeof WaitRecord>;

const Note = z.object({ at: z.string(), message: z.string() });

export const ErrorsRecord = z.object({
  channel: z.string(),
  recent: z.array(Note).max(20),
  cleanupFailures: z.object({ count: z.number().int().positive(), last: Note }).optional(),
});
export type ErrorsRecord = z.infer<typeof ErrorsRecord>;

export const PolicyRecord = z.object({
  channel: z.string(),
  kind: z.string(),
  maxInFlight: z.number().int().positive(),
  submitsPerSecond: z.number().nonnegative(),
  coolDownMs: z.number().int().nonnegative(),
});
export type PolicyRecord = z.infer<typeof PolicyRecord>;

/** A key's bucket as the edges share it: `tokens` left at `at` (epoch ms); refills at the configured rate. */
export const RateRecord = z.object({ tokens: z.number().nonnegative(), at: time });
export type RateRecord = z.infer<typeof RateRecord>;

/** A TTL as the server reads it (whole seconds, at least one). */
export const ttlOf = (ms: number): string => `${Math.max(1, Math.ceil(ms / 1000))}s`;
