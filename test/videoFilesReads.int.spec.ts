import { randomBytes } from "node:crypto";
import type { ObjectResult, ObjectStore } from "@nats-io/obj";
import { describe, expect, it } from "vitest";
import { ServiceUnavailableError } from "../services/shared/errors.ts";
import { Semaphore } from "../services/shared/semaphore.ts";
import { STORE_READS_AT_ONCE, VideoFiles } from "../services/edge/video/videoFiles.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";

const videoName = () => `v${randomBytes(24).toString("base64url")}.mp4`;

/** The store with its whole-file reads counted: how many, and how many at most at once. */
function countingReads(store: ObjectStore): { store: ObjectStore; reads: () => number; mostAtOnce: () => number } {
  let reads = 0;
  let running = 0;
  let mostAtOnce = 0;
  const counted = new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      if (property !== "get") return value.bind(target);
      return async (name: string): Promise<ObjectResult | null> => {
        reads++;
        mostAtOnce = Math.max(mostAtOnce, ++running);
        const result = (await Reflect.apply(value, target, [name])) as ObjectResult | null;
        if (!result) {
          running--;
          return result;
        }
        void result.error.finally(() => running--);
        return result;
      };
    },
  });
  return { store: counted, reads: () => reads, mostAtOnce: () => mostAtOnce };
}

describe("reading stored videos at the edge", () => {
  const suite = natsPerSuite("video-files-test", 2000);

  it("reads one file at a time, once for all the requests that wait for it, and serves each request its range", async () => {
    const names = [videoName(), videoName(), videoName()];
    const bodies = names.map(() => randomBytes(300_000));
    for (const [i, name] of names.entries()) await suite.nats.videos.putBlob({ name }, bodies[i] ?? Buffer.alloc(0));
    const { store, reads, mostAtOnce } = countingReads(suite.nats.videos);
    const files = new VideoFiles(store, new Semaphore(STORE_READS_AT_ONCE));

    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => files.serve(names[i % 3] ?? "", `bytes=${i}-${i + 9}`)));
    expect(answers.map((answer) => answer.status)).toEqual(Array(12).fill(206));
    answers.forEach((answer, i) => expect(answer.body).toEqual(bodies[i % 3]?.subarray(i, i + 10)));
    expect(reads()).toBe(3);
    expect(mostAtOnce()).toBe(1);
  });

  it("gives up a read that brings nothing (its consumer lost with the connection): 503, and the next request reads again", async () => {
    const name = videoName();
    await suite.nats.videos.putBlob({ name }, randomBytes(1000));
    let hang = true;
    const hanging = new Proxy(suite.nats.videos, {
      get(target, property, receiver) {
        const value: unknown = Reflect.get(target, property, receiver);
        if (typeof value !== "function") return value;
        if (property !== "get" || !hang) return value.bind(target);
        return async (): Promise<ObjectResult> => {
          const info = await target.info(name);
          if (!info) throw new Error("the video was not stored");
          return { info, data: new ReadableStream<Uint8Array>(), error: new Promise<Error | null>(() => undefined) };
        };
      },
    });
    const files = new VideoFiles(hanging, new Semaphore(STORE_READS_AT_ONCE), { stallMs: 200 });
    await expect(files.serve(name, "")).rejects.toBeInstanceOf(ServiceUnavailableError);
    hang = false;
    expect((await files.serve(name, "")).status).toBe(200);
  });
});

describe("reading stored videos at the edge, at their real sizes", () => {
  const suite = natsPerSuite("video-files-sizes-test", 2000);

  it("six requests for three 20 MB videos at once keep the edge's connection (it was cut off as a slow consumer and the reads never ended)", async () => {
    const names = [videoName(), videoName(), videoName()];
    for (const name of names) await suite.nats.videos.putBlob({ name }, randomBytes(20 * 1024 * 1024));
    const disconnects: string[] = [];
    void (async () => {
      for await (const status of suite.nats.nc.status()) if (status.type === "disconnect") disconnects.push(status.type);
    })();
    const files = new VideoFiles(suite.nats.videos, new Semaphore(STORE_READS_AT_ONCE));
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => files.serve(names[i % 3] ?? "", "bytes=0-9")));
    expect(answers.map((answer) => answer.status)).toEqual(Array(6).fill(206));
    expect(disconnects).toEqual([]);
  });
});
