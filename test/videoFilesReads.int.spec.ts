import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer, type ServerResponse } from "node:http";
import { connect as tcpConnect, type AddressInfo, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buffer } from "node:stream/consumers";
import type { ObjectResult, ObjectStore } from "@nats-io/obj";
import { beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { setTimeout as sleep } from "node:timers/promises";
import { NotFoundError, ServiceUnavailableError } from "../services/shared/errors.ts";
import { LocalBudget } from "../services/edge/rateLimiter.ts";
import { Semaphore } from "../services/shared/semaphore.ts";
import { writeReply, type HttpReply } from "../services/edge/http/reply.ts";
import { STORE_READS_AT_ONCE, VideoFiles, type VideoFilesOptions } from "../services/edge/video/videoFiles.ts";
import { keptFileDescriptors } from "./helpers/keptFiles.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";

/**
 * `files`, let go when the test ends, as the edge lets its own go when it stops; then no kept file may be left
 * open (a lease never ended keeps its file until the garbage collector closes it, with Node's warning).
 */
function closedAfterTest(files: VideoFiles): VideoFiles {
  onTestFinished(async () => {
    files.close();
    await expect.poll(keptFileDescriptors).toEqual([]);
  });
  return files;
}

const videoName = () => `v${randomBytes(24).toString("base64url")}.mp4`;
const KEEP = { keepBytes: 1024 ** 3 };

/** The bytes an answer sends (a file's, as the edge streams them). */
async function bodyOf(reply: HttpReply): Promise<Buffer> {
  if (reply.file) return buffer(reply.file.open());
  return Buffer.from(reply.body ?? "");
}

/** The store with its whole-file reads (`get`) or its looks (`info`) counted: how many, and how many at most at once. */
function countingReads(store: ObjectStore, method: "get" | "info" = "get"): { store: ObjectStore; reads: () => number; mostAtOnce: () => number } {
  let reads = 0;
  let running = 0;
  let mostAtOnce = 0;
  const counted = new Proxy(store, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      if (property !== method) return value.bind(target);
      return async (name: string): Promise<unknown> => {
        reads++;
        mostAtOnce = Math.max(mostAtOnce, ++running);
        const result: unknown = await Reflect.apply(value, target, [name]);
        // A read runs until its stream's end (its `error` settles then); a look is over with its answer.
        if (method === "get" && result) void (result as ObjectResult).error.finally(() => running--);
        else running--;
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
    const files = closedAfterTest(new VideoFiles(store, new Semaphore(STORE_READS_AT_ONCE), KEEP));

    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => files.serve(names[i % 3] ?? "", `bytes=${i}-${i + 9}`)));
    expect(answers.map((answer) => answer.status)).toEqual(Array(12).fill(206));
    for (const [i, answer] of answers.entries()) expect(await bodyOf(answer)).toEqual(bodies[i % 3]?.subarray(i, i + 10));
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
    const files = closedAfterTest(new VideoFiles(hanging, new Semaphore(STORE_READS_AT_ONCE), { ...KEEP, readStallMs: 200 }));
    await expect(files.serve(name, "")).rejects.toBeInstanceOf(ServiceUnavailableError);
    hang = false;
    const answer = await files.serve(name, "");
    expect(answer.status).toBe(200);
    expect((await bodyOf(answer)).length).toBe(1000);
  });
});

describe("looking stored files up (the route takes no key)", () => {
  const suite = natsPerSuite("video-files-lookups-test", 2000);


  it("looks a name up once a quarter second however many ask, refuses made-up names past the budget (503), and finds a deletion within the quarter second", async () => {
    const name = videoName();
    await suite.nats.videos.putBlob({ name }, randomBytes(1000));
    const { store, reads: looks } = countingReads(suite.nats.videos, "info");
    const files = closedAfterTest(new VideoFiles(store, new Semaphore(STORE_READS_AT_ONCE), { ...KEEP, lookups: new LocalBudget(0.001, 3) }));

    // A player's burst of Range requests: one look.
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => files.serve(name, `bytes=${i}-${i + 9}`)));
    // Answers never sent: each lets its file go (as writeReply does for a client already gone).
    for (const answer of answers) answer.file?.skip();
    expect([answers.map((answer) => answer.status), looks()]).toEqual([Array(20).fill(206), 1]);
    // Made-up names each cost a look, within what is left of the budget (2 of 3); then 503 without one.
    const madeUp = await Promise.allSettled(Array.from({ length: 10 }, () => files.serve(videoName(), "")));
    expect(madeUp.map((result) => (result.status === "rejected" ? (result.reason as Error).constructor.name : "served"))).toEqual([
      ...Array(2).fill("NotFoundError"),
      ...Array(8).fill("ServiceUnavailableError"),
    ]);
    expect(looks()).toBe(3);
    // A name found stored lately is looked at again once its look is old, whatever the budget says.
    await sleep(300);
    const again = await files.serve(name, "");
    again.file?.skip();
    expect(again.status).toBe(200);
    expect(looks()).toBe(4);
    // Deleted through another edge: gone here once the last look is old.
    await suite.nats.videos.delete(name);
    await sleep(300);
    await expect(files.serve(name, "")).rejects.toBeInstanceOf(NotFoundError);
  });
});

/** `files` behind a node:http server as the edge answers (writeReply); the answers under way are kept to look at. */
async function serving(files: VideoFiles): Promise<{ port: number; answers: ServerResponse[] }> {
  const answers: ServerResponse[] = [];
  const server = createServer((req, res) => {
    answers.push(res);
    files.serve(decodeURIComponent((req.url ?? "").slice(1)), req.headers.range ?? "", undefined, req.headers["if-none-match"] ?? "").then(
      (reply) => writeReply(res, reply),
      (error: unknown) => writeReply(res, { status: 500, body: String(error) }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onTestFinished(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { port: (server.address() as AddressInfo).port, answers };
}

/** A client that asks for a file and then reads nothing. */
function stalledClient(port: number, name: string, method = "GET"): Socket {
  const socket = tcpConnect(port, "127.0.0.1");
  socket.on("error", () => undefined);
  socket.pause();
  socket.write(`${method} /${encodeURIComponent(name)} HTTP/1.1\r\nHost: x\r\n\r\n`);
  onTestFinished(() => void socket.destroy());
  return socket;
}

/** Three videos of a real size, stored once for every test here (storing them is most of this file's time). */
describe("reading and sending stored videos at their real sizes", () => {
  const suite = natsPerSuite("video-files-sizes-test", 2000);
  const SIZE = 20 * 1024 * 1024;
  const names = [videoName(), videoName(), videoName()];
  beforeAll(async () => {
    for (const name of names) await suite.nats.videos.putBlob({ name }, randomBytes(SIZE));
  });

  function keepingDir(): string {
    const dir = mkdtempSync(join(tmpdir(), "reelay-files-test-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  }

  const filesOn = (store: ObjectStore, options: Partial<VideoFilesOptions> = {}) =>
    closedAfterTest(new VideoFiles(store, new Semaphore(STORE_READS_AT_ONCE), { keepBytes: 0, dir: keepingDir(), ...options }));

  it("six requests for three 20 MB videos at once keep the edge's connection (it was cut off as a slow consumer and the reads never ended)", async () => {
    const disconnects: string[] = [];
    void (async () => {
      for await (const status of suite.nats.nc.status()) if (status.type === "disconnect") disconnects.push(status.type);
    })();
    const files = filesOn(suite.nats.videos, KEEP);
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => files.serve(names[i % 3] ?? "", "bytes=0-9")));
    expect(answers.map((answer) => answer.status)).toEqual(Array(6).fill(206));
    for (const answer of answers) answer.file?.skip();
    expect(disconnects).toEqual([]);
  });

  it("twelve stalled answers hold one read's worth of memory each, and the disk holds each file once (the whole file was held per answer: 120 stalled answers, 1.4 GB)", async () => {
    const { store, reads } = countingReads(suite.nats.videos);
    const files = filesOn(store);
    const { port, answers } = await serving(files);
    for (let i = 0; i < 12; i++) stalledClient(port, names[i % 3] ?? "");
    await expect.poll(() => answers.length).toBe(12);
    // Each answer has sent what the kernel's buffers take and waits for its client.
    await expect.poll(() => answers.every((res) => res.socket !== null && res.socket.writableNeedDrain), { timeout: 20_000 }).toBe(true);
    const heldInMemory = answers.reduce((sum, res) => sum + (res.socket?.writableLength ?? 0) + res.writableLength, 0);
    expect(heldInMemory).toBeLessThan(12 * 256 * 1024);
    expect(reads()).toBe(3);
    expect(files.keptBytes).toBe(3 * SIZE);
  });

  it("files being sent hold the disk up to their room past the budget: past it a file not on the disk is refused (503) until one is let go (slow readers over many videos filled the disk)", async () => {
    const [held = "", next = ""] = names;
    const files = filesOn(suite.nats.videos, { sendingRoomBytes: SIZE + SIZE / 2 });
    const { port } = await serving(files);
    const reader = stalledClient(port, held);
    await expect.poll(() => files.keptBytes).toBe(SIZE);
    await expect(files.serve(next, "")).rejects.toBeInstanceOf(ServiceUnavailableError);
    reader.destroy();
    await expect.poll(() => files.keptBytes).toBe(0);
    const answer = await files.serve(next, "bytes=0-9");
    expect([answer.status, (await bodyOf(answer)).length]).toEqual([206, 10]);
  });

  it("a client that takes nothing for the send stall is cut off, and its file is let go", async () => {
    const [name = ""] = names;
    const files = filesOn(suite.nats.videos, { sendStallMs: 300 });
    const { port, answers } = await serving(files);
    stalledClient(port, name);
    await expect.poll(() => files.keptBytes).toBe(SIZE);
    await expect.poll(() => answers[0]?.destroyed, { timeout: 10_000 }).toBe(true);
    expect(answers[0]?.writableFinished).toBe(false);
    await expect.poll(() => files.keptBytes).toBe(0);
  });

  it("a file being sent is read from the store once however the cache is squeezed; HEAD, 304 and 416 hold nothing; nothing stays on the disk", async () => {
    const name = names[1] ?? "";
    const { store, reads } = countingReads(suite.nats.videos);
    const dir = keepingDir();
    const files = filesOn(store, { dir });
    const { port } = await serving(files);
    const stalled = stalledClient(port, name);
    await expect.poll(() => files.keptBytes).toBe(SIZE);
    const base = `http://127.0.0.1:${port}/${encodeURIComponent(name)}`;
    const head = await fetch(base, { method: "HEAD" });
    expect([head.status, head.headers.get("content-length")]).toEqual([200, String(SIZE)]);
    const etag = head.headers.get("etag") ?? "";
    expect((await fetch(base, { headers: { "if-none-match": etag } })).status).toBe(304);
    expect((await fetch(base, { headers: { range: `bytes=${SIZE}-` } })).status).toBe(416);
    const tail = await fetch(base, { headers: { range: `bytes=${SIZE - 10}-` } });
    expect([tail.status, (await tail.arrayBuffer()).byteLength]).toEqual([206, 10]);
    expect(reads()).toBe(1);
    expect(files.keptBytes).toBe(SIZE);
    expect(readdirSync(dir)).toEqual([]);
    // Once the stalled client is gone nothing is being read, and a cache of 0 bytes keeps nothing.
    stalled.destroy();
    await expect.poll(() => files.keptBytes).toBe(0);
  });
});
