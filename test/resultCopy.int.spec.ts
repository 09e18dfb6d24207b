import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { OBJECT_STORES } from "../infra/jetstreamLayout.ts";
import { copyResult, ResultGone, ResultUnusable } from "../services/runner/resultCopy.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { FAKE_MP4 } from "./fakes/openAiVideosUpstream.ts";
import { startTestNats } from "./helpers/testNats.ts";

const MAX_BYTES = 64 * 1024;

/** What the result address answers, by path. */
const answers: Record<string, (res: import("node:http").ServerResponse) => void> = {
  "/video.mp4": (res) => res.writeHead(200, { "content-type": "video/mp4" }).end(FAKE_MP4),
  "/chunked.mp4": (res) => {
    // Arrives in many small pieces, without a length: the cap is counted as it streams.
    res.writeHead(200, { "content-type": "video/mp4" });
    res.write(FAKE_MP4);
    for (let i = 0; i < 50; i++) res.write(Buffer.alloc(1024, i));
    res.end();
  },
  "/page.html": (res) => res.writeHead(200, { "content-type": "text/html" }).end("<html></html>"),
  "/not-mp4": (res) => res.writeHead(200, { "content-type": "application/octet-stream" }).end(Buffer.alloc(64, 7)),
  "/empty": (res) => res.writeHead(200, { "content-type": "video/mp4" }).end(),
  "/declared-big": (res) => res.writeHead(200, { "content-type": "video/mp4", "content-length": String(MAX_BYTES + 1) }).end(Buffer.alloc(MAX_BYTES + 1)),
  "/expired": (res) => res.writeHead(403).end(),
  "/cut": (res) => {
    res.writeHead(200, { "content-type": "video/mp4", "content-length": "10000" });
    res.write(FAKE_MP4);
    setTimeout(() => res.destroy(), 20);
  },
};

describe("copying a result into the object store", () => {
  let server: { url: string; stop(): Promise<void> };
  let nats: Nats;
  let http: Server;
  let base = "";
  const dir = mkdtempSync(join(tmpdir(), "reelay-result-copy-"));
  beforeAll(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, "result-copy", { replicas: 1, leaseMs: 2000 });
    http = createServer((req, res) => (answers[req.url ?? ""] ?? ((r) => r.writeHead(404).end()))(res));
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => http?.close(resolve));
    await nats?.nc.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  let copies = 0;
  /** A copy through the client's put, or (`asNew`) written as a new object (a task's first copy). */
  const copy = (path: string, asNew = false, maxBytes = MAX_BYTES) =>
    copyResult({ kind: "url", url: `${base}${path}` }, `copy-${++copies}.mp4`, {
      videos: nats.videos,
      ...(asNew ? { newIn: { nc: nats.nc, js: nats.js, jsm: nats.jsm, name: OBJECT_STORES.videos } } : {}),
      maxBytes,
      allowPrivateAddresses: true,
      signal: new AbortController().signal,
    });
  /** Nothing is left in the store under that name (no object, or only the marker of a deleted one). */
  const nothingStored = async () => expect((await nats.videos.info(`copy-${copies}.mp4`))?.deleted ?? true).toBe(true);

  it.each([false, true])("an MP4 is stored byte for byte, whole or in pieces (as a new object: %s)", async (asNew) => {
    const stored = await copy("/video.mp4", asNew);
    expect(stored).toEqual({ object: `copy-${copies}.mp4`, bytes: FAKE_MP4.length, contentType: "video/mp4" });
    expect(Buffer.from((await nats.videos.getBlob(stored.object)) ?? [])).toEqual(FAKE_MP4);
    const pieces = await copy("/chunked.mp4", asNew);
    expect(pieces.bytes).toBe(FAKE_MP4.length + 50 * 1024);
  });

  it("a rendered file is stored the same way", async () => {
    const path = join(dir, "rendered.mp4");
    writeFileSync(path, FAKE_MP4);
    const stored = await copyResult({ kind: "file", path }, "rendered.mp4", { videos: nats.videos, maxBytes: MAX_BYTES, allowPrivateAddresses: true, signal: new AbortController().signal });
    expect(stored.bytes).toBe(FAKE_MP4.length);
  });

  it.each(
    [false, true].flatMap((asNew) => [
      ["larger than the cap as it streams", "/chunked.mp4", 16 * 1024, /larger than 16384 bytes/, asNew] as const,
      ["larger than the cap by its declared length", "/declared-big", MAX_BYTES, /larger than 65536 bytes/, asNew] as const,
      ["not an MP4", "/not-mp4", MAX_BYTES, /not an MP4 file/, asNew] as const,
      ["not a video type", "/page.html", MAX_BYTES, /came as text\/html, not video\/mp4/, asNew] as const,
      ["empty", "/empty", MAX_BYTES, /is empty/, asNew] as const,
    ]),
  )("a result %s can never be used: the task fails with that reason, nothing is stored (as a new object: %s)", async (_case, path, maxBytes, reason, asNew) => {
    const attempt = copy(path, asNew, maxBytes);
    await expect(attempt).rejects.toBeInstanceOf(ResultUnusable);
    await expect(attempt).rejects.toThrow(reason);
    await nothingStored();
  });

  it("an expired address is gone (the upstream may sign a fresh one); a download cut short is passing trouble, retried", async () => {
    await expect(copy("/expired")).rejects.toBeInstanceOf(ResultGone);
    const cut = copy("/cut");
    await expect(cut).rejects.toThrow();
    await expect(cut).rejects.not.toBeInstanceOf(ResultUnusable);
    await nothingStored();
  });
});
