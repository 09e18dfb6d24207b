import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { startChildService, writeConfigFile } from "./helpers/childService.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

const MIB = 1024 * 1024;
const A_BIG_UPLOAD = 10_000_000;

interface HeldRequest {
  socket: Socket;
  /** The answer's status line, once one came. */
  answer: () => string;
  /** Everything the edge sent. */
  text: () => string;
}

/**
 * A POST that declares `declared` bytes of body and sends only `sent` of them, holding the rest back (the way
 * a slow or hostile client does), with `authorization` as its whole header value ("" sends none).
 */
function heldRequest(port: number, path: string, authorization: string, declared: number, sent = 0): HeldRequest {
  const socket = connect(port, "127.0.0.1");
  let text = "";
  socket.on("data", (chunk) => (text += chunk.toString("latin1")));
  socket.on("error", () => undefined);
  const auth = authorization ? `Authorization: ${authorization}\r\n` : "";
  socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: multipart/form-data; boundary=XX\r\nContent-Length: ${declared}\r\n\r\n`);
  if (sent > 0) socket.write(Buffer.alloc(sent, 0x61));
  onTestFinished(() => void socket.destroy());
  return { socket, answer: () => /^HTTP\/1\.1 \d{3}/.exec(text)?.[0] ?? "", text: () => text };
}

/** A create the edge reads and answers 404 for its unknown model: its body was let in, and nothing is made. */
const createLetIn = async (app: TestApp, key: string): Promise<number> => {
  const form = new FormData();
  form.append("model", "no-such-model");
  form.append("prompt", "a fox");
  return (await fetch(`${app.baseUrl}/v1/videos`, { method: "POST", headers: { authorization: `Bearer ${key}` }, body: form })).status;
};

/** The edge's bodies in flight, each bounded: what a client holding request bodies could do to it (issue 32's part D, again). */
describe("request bodies the edge holds while they arrive", () => {
  let app: TestApp;
  let port: number;

  beforeAll(async () => {
    app = await startTestApp({
      services: ["edge"],
      tweak: (config) => {
        config.limits.bodyBytesInFlight = 4 * MIB;
        config.limits.bodyBytesInFlightPerAccount = 2 * MIB;
      },
    });
    port = Number(new URL(app.baseUrl).port);
  });
  afterAll(async () => {
    await app?.stop();
  });

  it("a request without a key, or with one the edge does not know, is answered 401 before a byte of its body is read (each held 10 MB for up to 2 minutes)", async () => {
    const held = [
      heldRequest(port, "/v1/videos", "", A_BIG_UPLOAD),
      heldRequest(port, "/v1/videos", `Bearer rly_${"A".repeat(32)}`, A_BIG_UPLOAD, 1000),
      heldRequest(port, "/api/compat/videosGenerations", "Bearer sk-not-ours", 500_000),
      heldRequest(port, "/v1/chat/completions", "", 500_000),
    ];
    await expect.poll(() => held.map((request) => request.answer()), { timeout: 5000 }).toEqual(Array(4).fill("HTTP/1.1 401"));
  });

  it("a client uploading 10 MB with a mistyped key reads its 401, and one uploading 12 MB its 413: a refused body is read and dropped (closing on it reset the connection: EPIPE)", async () => {
    // An edge of its own process: in the test's own process the client's writes and the edge's close take turns
    // on one event loop, and the reset that lost the answer did not happen.
    const edge = await startChildService(["edge"], { NATS_URL: app.natsUrl, REELAY_CONFIG: writeConfigFile(app.config) });
    onTestFinished(() => void edge.kill("SIGKILL"));
    for (let i = 0; i < 3; i++) {
      const form = new FormData();
      form.append("model", "VideoModel-2.0-mini");
      form.append("prompt", "a fox");
      form.append("input_reference", new Blob([Buffer.alloc(10_400_000, 1)], { type: "image/png" }), "a.png");
      const answer = await fetch(`http://127.0.0.1:${edge.port}/v1/videos`, { method: "POST", headers: { authorization: `Bearer rly_${"B".repeat(32)}` }, body: form });
      expect(answer.status).toBe(401);
    }
    const form = new FormData();
    form.append("input_reference", new Blob([Buffer.alloc(12_000_000, 1)], { type: "image/png" }), "a.png");
    const tooLarge = await fetch(`http://127.0.0.1:${edge.port}/v1/videos`, { method: "POST", headers: { authorization: `Bearer ${await app.keyFor("uploads-too-large")}` }, body: form });
    expect([tooLarge.status, ((await tooLarge.json()) as { error: { message: string } }).error.message]).toEqual([413, expect.stringMatching(/request body is \d+ bytes; the limit is \d+/)]);
  });

  it("one account holds at most its share: the next body is refused 429 before it is read, another account still gets in, and the room comes back when the answers end", async () => {
    const [greedy, other] = [await app.keyFor("greedy-bodies"), await app.keyFor("other-bodies")];
    const held = [heldRequest(port, "/v1/videos", `Bearer ${greedy}`, 1_000_000, 100), heldRequest(port, "/v1/videos", `Bearer ${greedy}`, 1_000_000, 100)];
    const third = heldRequest(port, "/v1/videos", `Bearer ${greedy}`, 1_000_000);
    await expect.poll(third.answer, { timeout: 5000 }).toBe("HTTP/1.1 429");
    expect(held.map((request) => request.answer())).toEqual(["", ""]);
    expect(await createLetIn(app, other)).toBe(404);
    for (const request of held) request.socket.destroy();
    await expect.poll(() => createLetIn(app, greedy)).toBe(404);
  });

  it("the edge holds at most its whole budget: past it a body is refused 503 with Retry-After, before it is read", async () => {
    const keys = [await app.keyFor("budget-a"), await app.keyFor("budget-b"), await app.keyFor("budget-c")];
    const held = keys.slice(0, 2).flatMap((key) => [heldRequest(port, "/v1/videos", `Bearer ${key}`, 1_000_000, 100), heldRequest(port, "/v1/videos", `Bearer ${key}`, 1_000_000, 100)]);
    const refused = heldRequest(port, "/v1/videos", `Bearer ${keys[2]}`, 200_000);
    await expect.poll(refused.answer, { timeout: 5000 }).toBe("HTTP/1.1 503");
    expect(refused.text()).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(held.map((request) => request.answer())).toEqual(["", "", "", ""]);
    for (const request of held) request.socket.destroy();
    await expect.poll(() => createLetIn(app, keys[2] ?? "")).toBe(404);
  });
});

/** Idle connections hold one of the process's files each: a flood of them failed a render with EMFILE. */
describe("connections the edge holds at once", () => {
  let app: TestApp;
  let port: number;
  const CAP = 40;

  beforeAll(async () => {
    app = await startTestApp({ services: ["edge"], tweak: (config) => void (config.limits.maxConnections = CAP) });
    port = Number(new URL(app.baseUrl).port);
  });
  afterAll(async () => {
    await app?.stop();
  });

  it(`past limits.maxConnections (${CAP} here) a new connection is closed as soon as it is accepted, and the edge serves again once they go`, async () => {
    const sockets = Array.from({ length: 2 * CAP }, () => {
      const socket = connect(port, "127.0.0.1");
      socket.on("error", () => undefined);
      onTestFinished(() => void socket.destroy());
      return socket;
    });
    await expect.poll(() => sockets.filter((socket) => socket.closed).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(CAP);
    expect(sockets.filter((socket) => !socket.closed).length).toBeLessThanOrEqual(CAP);
    for (const socket of sockets) socket.destroy();
    await expect.poll(async () => (await fetch(`${app.baseUrl}/healthz`)).status).toBe(200);
  });
});
