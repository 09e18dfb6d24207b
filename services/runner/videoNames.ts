import { createHmac, randomBytes } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { KV } from "@nats-io/kv";
import { z } from "zod";

/** The entry of the `secrets` bucket holding the key stored videos are named with. */
const VIDEO_NAME_KEY = "video-names";
const StoredKey = z.string().regex(/^[A-Za-z0-9_-]{43}$/);

/**
 * The key every runner names stored videos with: made by the first runner that needs it (the bucket's
 * create is exclusive, so racing runners agree) and kept for good. A name must not change between a
 * runner's first copy and another runner's retry of it, so it is derived, never drawn per attempt.
 */
export async function videoNameKey(secrets: KV): Promise<Buffer> {
  const read = async () => {
    const entry = await secrets.get(VIDEO_NAME_KEY);
    return entry?.operation === "PUT" ? Buffer.from(StoredKey.parse(entry.string()), "base64url") : undefined;
  };
  const found = await read();
  if (found) return found;
  const mine = randomBytes(32).toString("base64url");
  if (await secrets.create(VIDEO_NAME_KEY, mine).then(() => true, () => false)) return Buffer.from(mine, "base64url");
  // Another runner made it first. On a cluster a direct get may be answered by a replica that has not applied
  // that write yet (reading back right after the create failed there): read again for a moment.
  for (let attempt = 0; attempt < 20; attempt++) {
    const made = await read();
    if (made) return made;
    await sleep(100);
  }
  throw new Error("could not create the key stored videos are named with");
}

/**
 * A task's stored video: `v` and 192 bits of HMAC-SHA256 of its task id (task ids are never reused), so
 * the name is bounded (37 characters), cannot be guessed or enumerated without the key, is the same on
 * every attempt for the task, and no upstream's id can make two tasks share one.
 */
export const videoObjectName = (key: Buffer, taskId: number): string => `v${createHmac("sha256", key).update(`video:${taskId}`).digest("base64url").slice(0, 32)}.mp4`;
