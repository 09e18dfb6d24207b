import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OBJECT_STORES } from "../infra/jetstreamLayout.ts";
import { putNewObject, type ObjectBucket } from "../services/runner/newObject.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { startTestNats } from "./helpers/testNats.ts";

/** `bytes` in pieces of `piece` bytes, failing after `failAfter` pieces if given. */
async function* streamOf(bytes: Buffer, piece: number, failAfter?: number): AsyncGenerator<Uint8Array> {
  for (let offset = 0, pieces = 0; offset < bytes.length; offset += piece, pieces++) {
    if (failAfter !== undefined && pieces >= failAfter) throw new Error("download cut");
    yield bytes.subarray(offset, offset + piece);
  }
}

describe("a new object written directly into the videos bucket", () => {
  let server: { url: string; stop(): Promise<void> };
  let nats: Nats;
  let bucket: ObjectBucket;
  beforeAll(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, "new-object", { replicas: 1, leaseMs: 2000 });
    bucket = { nc: nats.nc, js: nats.js, jsm: nats.jsm, name: OBJECT_STORES.videos };
  });
  afterAll(async () => {
    await nats?.nc.close();
    await server?.stop();
  });
  const chunkMessages = async () => (await nats.jsm.streams.info(`OBJ_${OBJECT_STORES.videos}`, { subjects_filter: `$O.${OBJECT_STORES.videos}.C.>` })).state.subjects ?? {};

  it.each([
    ["small, one chunk", 32, 7],
    ["exactly one chunk", 128 * 1024, 4096],
    ["several chunks from uneven pieces", 300 * 1024 + 17, 10_000],
  ])("%s: the object store client reads it back whole, digest checked, with the client's description", async (_case, size, piece) => {
    const bytes = randomBytes(size);
    const name = `direct-${size}.mp4`;
    expect(await putNewObject(bucket, name, "video result", streamOf(bytes, piece))).toEqual({ name, size });
    const info = await nats.videos.info(name);
    expect(info).toMatchObject({ name, description: "video result", size, chunks: Math.ceil(size / (128 * 1024)), deleted: false });
    // getBlob verifies the SHA-256 digest of what it read against the description's.
    expect(Buffer.from((await nats.videos.getBlob(name)) ?? [])).toEqual(bytes);
  });

  it("the client's own put of the same name later replaces it and purges its chunks", async () => {
    const name = "replaced.mp4";
    await putNewObject(bucket, name, "video result", streamOf(randomBytes(1000), 100));
    const first = (await nats.videos.info(name))?.nuid;
    await nats.videos.putBlob({ name, description: "video result" }, randomBytes(10));
    expect((await nats.videos.info(name))?.size).toBe(10);
    expect(Object.keys(await chunkMessages()).some((subject) => subject.endsWith(`.${first}`))).toBe(false);
  });

  it("a source that fails part-way leaves no chunks and no object", async () => {
    const before = Object.keys(await chunkMessages()).length;
    const name = "cut.mp4";
    await expect(putNewObject(bucket, name, "video result", streamOf(randomBytes(400 * 1024), 64 * 1024, 4))).rejects.toThrow("download cut");
    expect(await nats.videos.info(name)).toBeNull();
    expect(Object.keys(await chunkMessages()).length).toBe(before);
  });
});
