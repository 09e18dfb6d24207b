import { createHash } from "node:crypto";
import type { JetStreamClient, JetStreamManager } from "@nats-io/jetstream";
import { headers, nuid, type NatsConnection } from "@nats-io/transport-node";

/** An object store bucket, for writing into it directly. */
export interface ObjectBucket {
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** The bucket's name (its stream is `OBJ_<name>`). */
  name: string;
}

/** The object store client's chunk size (128 KiB), within the server's largest message. */
const CHUNK_BYTES = 128 * 1024;

/**
 * Stores a new object the way the object store client (@nats-io/obj 3.4) stores one, in the layout of NATS
 * ADR-20 — its chunks on `$O.<bucket>.C.<nuid>`, then its description (size, chunk count, SHA-256 digest) on
 * `$O.<bucket>.M.<name in padded base64url>`, rolling up any older description — without the client's first
 * step: a look-up of an older object of the same name, whose chunks it purges afterwards. Only for a name
 * that cannot have been written before (a task's first copy of its result, by its first runner); anything
 * else goes through the client's `put`.
 *
 * Why not the client for every copy: that look-up is a JetStream API request, answered with an error when
 * there is no such object (the client then builds an error object) and announced on an advisory subject.
 * Skipping it took an instant task from 1,833–2,067 µs of CPU to 1,740–1,860 (three alternating runs each of
 * bench/tools/instantCpuSplit.ts). The client reads what this writes: test/newObject.int.spec.ts.
 *
 * A failure part-way purges the chunks already stored, as the client does. The chunks come as an async
 * iterable, not the client's web stream: Node 20 builds every web stream as a transferable object.
 */
export async function putNewObject(bucket: ObjectBucket, name: string, description: string, source: AsyncIterable<Uint8Array>): Promise<{ name: string; size: number }> {
  const id = nuid.next();
  const chunkSubject = `$O.${bucket.name}.C.${id}`;
  const maxChunk = Math.min(CHUNK_BYTES, bucket.nc.info?.max_payload ?? CHUNK_BYTES);
  const digest = createHash("sha256");
  let size = 0;
  let chunks = 0;
  const publishChunk = async (chunk: Uint8Array) => {
    digest.update(chunk);
    size += chunk.byteLength;
    chunks++;
    await bucket.js.publish(chunkSubject, chunk);
  };
  try {
    let pending: Uint8Array[] = [];
    let pendingBytes = 0;
    for await (const value of source) {
      pending.push(value);
      pendingBytes += value.byteLength;
      while (pendingBytes >= maxChunk) {
        const joined = Buffer.concat(pending);
        await publishChunk(joined.subarray(0, maxChunk));
        pending = joined.byteLength > maxChunk ? [joined.subarray(maxChunk)] : [];
        pendingBytes -= maxChunk;
      }
    }
    if (pendingBytes > 0) await publishChunk(Buffer.concat(pending));
    const meta = {
      bucket: bucket.name,
      nuid: id,
      size,
      chunks,
      name,
      description,
      options: { max_chunk_size: maxChunk },
      mtime: new Date().toISOString(),
      digest: `SHA-256=${toBase64UrlPadded(digest.digest())}`,
      deleted: false,
    };
    const rollup = headers();
    rollup.set("Nats-Rollup", "sub");
    await bucket.js.publish(`$O.${bucket.name}.M.${toBase64UrlPadded(Buffer.from(name))}`, JSON.stringify(meta), { headers: rollup });
    return { name, size };
  } catch (error) {
    await bucket.jsm.streams.purge(`OBJ_${bucket.name}`, { filter: chunkSubject }).catch(() => undefined);
    throw error;
  }
}

const toBase64UrlPadded = (bytes: Buffer): string => bytes.toString("base64").replace(/\+/g, "-").replace(/\//g, "_");
