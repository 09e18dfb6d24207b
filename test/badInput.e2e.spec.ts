import { request as httpRequest, type ClientRequest, type OutgoingHttpHeaders } from "node:http";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReelayConfig } from "../contracts/config.ts";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { anyCodePoint } from "./helpers/anyCodePoint.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

/**
 * Issue 2 item 8: bad input never crashes the edge or leaks internals; every refusal is the video
 * envelope `{code,msg}` with HTTP status = code and a message naming the field (design.md, "Bad input").
 */

const CREATE = "/api/compat/videosGenerations";
const QUERY = "/api/compat/videosTask";
const MODEL = "VideoModel-2.0-mini";
const VALID = { model: MODEL, prompt: "a red fox in snow", duration: 4 };
const LIMIT = 1_048_576;
const ACCOUNT = "bad-input";

interface Answer {
  status: number;
  contentType: string;
  text: string;
  headers: { get(name: string): string };
}

let app: TestApp;
let auth: Record<string, string>;

/** One HTTP exchange over node:http, so bodies, headers and framing are exactly what the test says. */
function exchange(method: string, path: string, headers: OutgoingHttpHeaders, send: (req: ClientRequest) => void): Promise<Answer> {
  const { hostname, port } = new URL(app.baseUrl);
  return new Promise((resolve, reject) => {
    // A fresh connection each time: a refused body makes the edge close the connection.
    const req = httpRequest({ host: hostname, port, method, path, headers, agent: false });
    let answered = false;
    req.on("response", (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on("data", (chunk: Buffer) => chunks.push(chunk));
      res.on("error", reject);
      res.on("end", () => {
        const headers = { get: (name: string) => String(res.headers[name] ?? "") };
        resolve({ status: res.statusCode ?? 0, contentType: String(res.headers["content-type"]), text: Buffer.concat(chunks).toString("utf8"), headers });
        req.destroy();
      });
    });
    // Once answered, the edge may close while we still write a refused body: that is expected.
    req.on("error", (error) => answered || reject(error));
    send(req);
  });
}

const call = (method: string, path: string, body?: string | Buffer, headers: OutgoingHttpHeaders = auth) =>
  exchange(method, path, headers, (req) => req.end(body));
const create = (body: string | Buffer) => call("POST", CREATE, body);
/**
 * The edge still answers and is healthy: /healthz's 200, or what it said. It is asked until it agrees (expect.poll),
 * as a balancer asks again: /healthz rightly answers 503 for a moment when the edge's feed is silent for 2 s or
 * behind, which a loaded machine can cause (a profiled run failed once on the 250th task id, with the cause unseen).
 */
const healthy = async () => {
  const answer = await call("GET", "/healthz", undefined, {});
  return answer.status === 200 || `${answer.status} ${answer.text}`;
};

/** Each code point as UTF-8 bytes, lone surrogates included (WTF-8), so they reach the server as sent. */
function wtf8(text: string): Buffer {
  const bytes: number[] = [];
  for (const ch of text) {
    const cp = ch.codePointAt(0) ?? 0;
    if (cp < 0x80) bytes.push(cp);
    else if (cp < 0x800) bytes.push(0xc0 | (cp >> 6), 0x80 | (cp & 63));
    else if (cp < 0x10000) bytes.push(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
    else bytes.push(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
  }
  return Buffer.from(bytes);
}
const percentEncode = (text: string) => [...wtf8(text)].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");

const STACK_OR_CLASS = [/^\s*at\s/m, /\(\S+:\d+:\d+\)/, /\b[A-Za-z]*Error:/, /node_modules|\/work\/|\.ts:\d+/];

/** Asserts the video envelope for an answer and returns its message. */
function envelope(answer: Answer, status: number): string {
  expect(answer.status, answer.text).toBe(status);
  expect(answer.contentType).toMatch(/^application\/json/);
  expect(answer.text).not.toMatch(/<html|<!doctype/i);
  const body = JSON.parse(answer.text) as { code?: unknown; msg?: unknown; data?: unknown };
  expect(body.code).toBe(status);
  expect(typeof body.msg).toBe("string");
  const msg = String(body.msg);
  expect(msg.length).toBeGreaterThan(0);
  for (const leak of STACK_OR_CLASS) expect(msg).not.toMatch(leak);
  if (status !== 200) expect(Object.keys(body).sort()).toEqual(["code", "msg"]);
  return msg;
}

beforeAll(async () => {
  // Valid bodies create real tasks; a long queue delay keeps them from rendering while we fire hundreds, and a
  // long poll keeps them from being asked about (hundreds polled every 50 ms were two fifths of this file's CPU).
  const idle = (provider: ReelayConfig["providers"][string]) => {
    if (provider.kind !== "local") return;
    provider.queueDelayMs = 600_000;
    provider.pollEveryMs = provider.pollMaxEveryMs = 600_000;
  };
  app = await startTestApp({ tweak: (config) => Object.values(config.providers).forEach(idle) });
  auth = { authorization: `Bearer ${await app.keyFor(ACCOUNT)}`, "content-type": "application/json" };
  // Create reserves the estimated cost (design.md, Billing): fund the account so no valid body is refused for money.
  const ledger = new AccountLedger(app.nats);
  await ledger.execute(ACCOUNT, { type: "credit", amountMicros: 1_000_000 * 1_000_000, creditId: "bad-input-suite" });
});
afterAll(async () => app?.stop());

interface CreateRow {
  name: string;
  /** A value to send as JSON, or `raw` text sent verbatim. */
  body: unknown;
  raw?: string;
  status: number;
  msg: string;
}

const json = (name: string, body: unknown, status: number, msg: string): CreateRow => ({ name, body, status, msg });
const raw = (name: string, text: string, status: number, msg: string): CreateRow => ({ name, body: undefined, raw: text, status, msg });
const withField = (field: string, value: unknown) => ({ ...VALID, [field]: value });

const createRows: CreateRow[] = [
  raw("malformed JSON (truncated)", '{"model":', 400, "not valid JSON"),
  raw("malformed JSON (unquoted key)", "{model: 1}", 400, "not valid JSON"),
  raw("malformed JSON (trailing comma)", `{"model":"${MODEL}","prompt":"p",}`, 400, "not valid JSON"),
  raw("JavaScript, not JSON", "{'model': undefined, prompt: NaN}", 400, "not valid JSON"),
  raw("empty body", "", 400, "request body is empty"),
  raw("whitespace-only body", " \n\t ", 400, "not valid JSON"),
  raw("JSON array body", "[]", 400, "request body must be a JSON object"),
  raw("JSON string body", '"model=VideoModel-2.0"', 400, "request body must be a JSON object"),
  raw("JSON number body", "42", 400, "request body must be a JSON object"),
  raw("JSON null body", "null", 400, "request body must be a JSON object"),
  raw("JSON boolean body", "true", 400, "request body must be a JSON object"),
  json("array wrapping a valid body", [VALID], 400, "request body must be a JSON object"),
  json("empty object", {}, 400, "model is required"),
  json("missing model", { prompt: "p" }, 400, "model is required and must be a string"),
  json("model a number", withField("model", 2), 400, "model is required and must be a string"),
  json("model null", withField("model", null), 400, "model is required and must be a string"),
  json("model empty", withField("model", ""), 400, "model must not be empty"),
  json("unknown model", withField("model", "VideoModel-9"), 403, "model not supported: VideoModel-9"),
  json("model in the wrong case", withField("model", "videomodel-2.0-mini"), 403, "model not supported"),
  json("model named like a prototype key", withField("model", "__proto__"), 403, "model not supported: __proto__"),
  json("missing prompt", { model: MODEL }, 400, "prompt is required and must be a string"),
  json("prompt a number", withField("prompt", 5), 400, "prompt is required and must be a string"),
  json("prompt empty", withField("prompt", ""), 400, "prompt must not be empty"),
  json("prompt whitespace only", withField("prompt", " \t\n\u3000 "), 400, "prompt must not be empty"),
  json("prompt over 4000 characters", withField("prompt", "x".repeat(4001)), 400, "prompt is 4001 characters; the limit is 4000"),
  json("prompt over 4000 emoji", withField("prompt", "🦊".repeat(4001)), 400, "prompt is 4001 characters"),
  json("duration a float", withField("duration", 4.5), 400, "duration must be an integer"),
  json("duration a string", withField("duration", "5"), 400, "duration must be an integer"),
  json("duration a boolean", withField("duration", true), 400, "duration must be an integer"),
  json("duration null", withField("duration", null), 400, "duration must be an integer"),
  raw("duration overflowing to Infinity", `{"model":"${MODEL}","prompt":"p","duration":1e400}`, 400, "duration must be an integer"),
  json("duration negative", withField("duration", -5), 400, "duration must be between 4 and 15"),
  json("duration zero", withField("duration", 0), 400, "duration must be between 4 and 15"),
  json("duration 3 (below 4)", withField("duration", 3), 400, "duration must be between 4 and 15"),
  json("duration 16 (above 15)", withField("duration", 16), 400, "duration must be between 4 and 15"),
  json("ratio unlisted", withField("ratio", "2:1"), 400, "ratio must be one of 16:9, 9:16, 1:1, 4:3, 3:4, 21:9"),
  json("ratio with a slash", withField("ratio", "16/9"), 400, "ratio must be one of"),
  json("ratio a number", withField("ratio", 1.78), 400, "ratio must be one of"),
  json("resolution 1080p", withField("resolution", "1080p"), 400, "resolution must be 720p"),
  json("resolution 720P", withField("resolution", "720P"), 400, "resolution must be 720p"),
  json("resolution 1280*720", withField("resolution", "1280*720"), 400, "resolution must be 720p"),
  json("resolution a number", withField("resolution", 720), 400, "resolution must be 720p"),
  json("generate_audio a string", withField("generate_audio", "true"), 400, "generate_audio must be a boolean"),
  json("generate_audio a number", withField("generate_audio", 1), 400, "generate_audio must be a boolean"),
  json("watermark a string", withField("watermark", "false"), 400, "watermark must be a boolean"),
  json("watermark null", withField("watermark", null), 400, "watermark must be a boolean"),
  json("image_url not a URL", withField("image_url", "a picture of a fox"), 400, "image_url must be an http(s) or data: URL"),
  json("image_url empty", withField("image_url", ""), 400, "image_url must be an http(s) or data: URL"),
  json("image_url ftp", withField("image_url", "ftp://example.com/a.png"), 400, "image_url must be an http(s)"),
  json("image_url javascript:", withField("image_url", "javascript:alert(1)"), 400, "image_url must be an http(s)"),
  json("image_url a number", withField("image_url", 42), 400, "image_url must be a string URL"),
  json("video_url file:", withField("video_url", "file:///etc/passwd"), 400, "video_url must be an http(s)"),
  json("audio_url an object", withField("audio_url", { href: "https://example.com/a.mp3" }), 400, "audio_url must be a string URL"),
  json("an unknown field", withField("seed", 42), 400, 'unknown field "seed"'),
  json("a field in the wrong case", withField("Prompt", "p"), 400, 'unknown field "Prompt"'),
  json("several unknown fields", { ...VALID, fps: 24, negative_prompt: "x" }, 400, 'unknown fields "fps", "negative_prompt"'),
  raw("a __proto__ field", `{"model":"${MODEL}","prompt":"p","__proto__":{"enabled":true}}`, 400, 'unknown field "__proto__"'),
  json("several wrong fields at once", { model: 1, prompt: "", ratio: "2:1" }, 400, "model is required and must be a string; prompt must not be empty; ratio must be one of"),
  // Refused before it is parsed (issue 32: what reads a parsed value recurses), whatever field holds it.
  raw("deeply nested JSON in an unknown field", `{"model":"${MODEL}","prompt":"p","x":${"[".repeat(50_000)}${"]".repeat(50_000)}}`, 400, "nests arrays or objects deeper than 128 levels"),
];

describe("bad input on POST videosGenerations answers a clear 4xx envelope", () => {
  it.each(createRows)("$name → $status", async (row) => {
    const answer = await create(row.raw ?? JSON.stringify(row.body));
    expect(envelope(answer, row.status)).toContain(row.msg);
  });

  it("reads a body that starts with a UTF-8 byte order mark, as RFC 8259 allows (was a 400 naming an invisible character)", async () => {
    const created = await create(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(VALID))]));
    envelope(created, 200);
    expect(JSON.parse(created.text)).toMatchObject({ data: { status: "pending" } });
  });

  it("checks the key before the body: malformed JSON without a key is 401", async () => {
    const answer = await call("POST", CREATE, "{oops", { "content-type": "application/json" });
    expect(envelope(answer, 401)).toContain("API key");
  });

  it("checks the key before the query: a bad query without a key is 401, with one a 400 naming the parameter", async () => {
    for (const path of ["/api/compat/videosTask?id=abc", "/api/compat/videosTasks?limit=0", "/api/compat/videosTask/events?id=abc"]) {
      expect(envelope(await call("GET", path, undefined, {}), 401), path).toContain("API key");
    }
    expect(envelope(await call("GET", "/api/compat/videosTask?id=abc"), 400)).toBe('id must be a positive integer task id, got "abc"');
    expect(envelope(await call("GET", "/api/compat/videosTask"), 400)).toBe("id is required: ?id=<task_id>, the task_id the create answered");
    expect(envelope(await call("GET", "/api/compat/videosTask/events"), 400)).toBe("id is required: ?id=<task_id>, the task_id the create answered");
    expect(envelope(await call("GET", "/api/compat/videosTasks?limit=0"), 400)).toBe('limit must be an integer from 1 to 100, got "0"');
  });

  it.each([
    ["CJK", "一只在雪地里奔跑的红狐狸，电影感"],
    ["emoji and ZWJ sequences", "🦊❄️🎬 👨‍👩‍👧 🏳️‍🌈"],
    ["Arabic (RTL)", "ثعلب أحمر يركض في الثلج"],
    ["Hebrew (RTL) with bidi controls", "\u202Bשועל אדום\u202C running in snow"],
    ["combining marks and a zero-width joiner", "e\u0301te\u0301 \u200D"],
    ["control characters", "fox\u0000\u0007\u001b[31m in snow"],
    ["4000 emoji (4000 characters, 8000 UTF-16 units)", "🦊".repeat(4000)],
  ])("accepts a %s prompt (200) and the task can be queried", async (_label, prompt) => {
    const created = await create(JSON.stringify({ ...VALID, prompt }));
    envelope(created, 200);
    const { data } = JSON.parse(created.text) as { data: { task_id: number; status: string } };
    expect(Number.isInteger(data.task_id)).toBe(true);
    expect(data.status).toBe("pending");
    envelope(await call("GET", `${QUERY}?id=${data.task_id}`), 200);
  });
});

describe("oversized bodies answer 413 without reading them", () => {
  const post = (headers: OutgoingHttpHeaders, send: (req: ClientRequest) => void) => exchange("POST", CREATE, { ...auth, ...headers }, send);
  const padded = (bytes: number) => {
    const text = JSON.stringify(VALID);
    return text + " ".repeat(bytes - Buffer.byteLength(text));
  };

  it("accepts a valid body of exactly 1 MiB (the limit is inclusive)", async () => {
    envelope(await create(padded(LIMIT)), 200);
  });

  it("refuses 1 MiB + 1 byte with a Content-Length header (413 naming the limit)", async () => {
    expect(envelope(await create(padded(LIMIT + 1)), 413)).toContain(`limit is ${LIMIT}`);
  });

  it("refuses on the declared Content-Length alone, before any body byte arrives", async () => {
    const answer = await post({ "content-length": String(64 * LIMIT) }, (req) => req.flushHeaders());
    expect(envelope(answer, 413)).toContain(`request body is ${64 * LIMIT} bytes; the limit is ${LIMIT}`);
  });

  it("refuses a chunked body (no Content-Length) once it passes the limit", async () => {
    const answer = await post({ "transfer-encoding": "chunked" }, (req) => {
      const chunk = Buffer.alloc(64 * 1024, " ");
      for (let sent = 0; sent <= 2 * LIMIT; sent += chunk.length) req.write(chunk);
      req.end();
    });
    expect(envelope(answer, 413)).toContain(`exceeds the limit of ${LIMIT} bytes`);
  });

  it("survives a client that disconnects halfway through a body", async () => {
    await new Promise<void>((resolve) => {
      const { hostname, port } = new URL(app.baseUrl);
      const req = httpRequest({ host: hostname, port, method: "POST", path: CREATE, headers: { ...auth, "content-length": "5000" }, agent: false });
      req.on("error", () => resolve());
      req.on("close", () => resolve());
      req.write('{"model":"VideoModel', () => setTimeout(() => req.destroy(), 20));
    });
    await expect.poll(healthy).toBe(true);
    envelope(await create(JSON.stringify(VALID)), 200);
  });
});

interface QueryRow {
  name: string;
  query: string;
  status: number;
  msg: string;
}
const q = (name: string, query: string, status: number, msg: string): QueryRow => ({ name, query, status, msg });
const queryRows: QueryRow[] = [
  q("no query string", "", 400, "id is required"),
  q("a bare '?'", "?", 400, "id is required"),
  q("id with no value", "?id", 400, "id is required"),
  q("empty id", "?id=", 400, "id is required"),
  q("id in the wrong case", "?ID=1", 400, "id is required"),
  q("task_id instead of id", "?task_id=1", 400, "id is required"),
  q("non-numeric id", "?id=abc", 400, 'id must be a positive integer task id, got "abc"'),
  q("float id", "?id=1.5", 400, "id must be a positive integer"),
  q("integral float id", "?id=1.0", 400, "id must be a positive integer"),
  q("exponent id", "?id=1e3", 400, "id must be a positive integer"),
  q("negative id", "?id=-1", 400, "id must be a positive integer"),
  q("zero id", "?id=0", 400, "id must be a positive integer"),
  q("id with a plus sign", "?id=%2B1", 400, "id must be a positive integer"),
  q("id with a space", "?id=%201", 400, "id must be a positive integer"),
  q("hex id", "?id=0x10", 400, "id must be a positive integer"),
  q("Infinity id", "?id=Infinity", 400, "id must be a positive integer"),
  q("huge id (30 digits)", `?id=${"9".repeat(30)}`, 400, "id must be a positive integer"),
  q("Arabic-Indic digits", `?id=${percentEncode("١٢")}`, 400, "id must be a positive integer"),
  q("NUL byte", "?id=%00", 400, "id must be a positive integer"),
  q("encoded lone surrogate", "?id=%ED%A0%80", 400, "id must be a positive integer"),
  q("invalid UTF-8", "?id=%FF%FE", 400, "id must be a positive integer"),
  q("a broken percent escape", "?id=%", 400, "id must be a positive integer"),
  q("a list of ids", "?id=1%2C2", 400, "id must be a positive integer"),
  q("a very long id", `?id=${"7".repeat(8000)}`, 400, "id must be a positive integer"),
  q("unknown id", "?id=424242", 404, "task 424242 does not exist"),
  q("largest accepted id, unknown", "?id=999999999999999", 404, "task 999999999999999 does not exist"),
];

describe("bad input on GET videosTask answers a clear 4xx envelope", () => {
  it.each(queryRows)("$name → $status", async (row) => {
    expect(envelope(await call("GET", `${QUERY}${row.query}`), row.status)).toContain(row.msg);
  });
});

describe("wrong methods and unknown paths answer the JSON envelope, never HTML", () => {
  it.each([
    ["GET", CREATE, "POST"],
    ["PUT", CREATE, "POST"],
    ["POST", `${QUERY}?id=1`, "GET, HEAD"],
    ["DELETE", `${QUERY}?id=1`, "GET, HEAD"],
  ])("%s %s → 405 naming the allowed method", async (method, path, allowed) => {
    const response = await call(method, path, method === "GET" ? undefined : JSON.stringify(VALID));
    expect(response.headers.get("allow")).toBe(allowed);
    expect(envelope(response, 405)).toContain(`${method} is not allowed`);
  });

  it("OPTIONS (a CORS preflight) is answered 204 with the methods, not an error", async () => {
    const response = await call("OPTIONS", CREATE);
    expect(response.status).toBe(204);
    expect(response.headers.get("allow")).toMatch(/POST/);
  });

  it.each([
    ["GET", "/"],
    ["GET", "/api/compat/videosgenerations"],
    ["GET", `${QUERY}/1`],
    ["POST", "/api/compat/videosGenerations/extra"],
    ["GET", "/%E0%A4%A"],
  ])("%s %s → 404", async (method, path) => {
    expect(envelope(await call(method, path, method === "GET" ? undefined : JSON.stringify(VALID)), 404)).toContain("no such endpoint");
  });

  it.each([
    ["/videos/nope.mp4", "no video named nope.mp4"],
    ["/videos/..%2F..%2Fetc%2Fpasswd", "no video named"],
    ["/videos/%E0%A4%A.mp4", "malformed video name"],
  ])("GET %s → 404 %s", async (path, msg) => {
    expect(envelope(await call("GET", path), 404)).toContain(msg);
  });
});

describe("for any input the edge answers an envelope and stays up (property-based)", () => {
  const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit));
  const anyChar = fc.oneof(
    { weight: 4, arbitrary: anyCodePoint },
    { weight: 2, arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 1 }) },
    { weight: 2, arbitrary: fc.string({ unit: "binary-ascii", minLength: 1, maxLength: 1 }) },
    { weight: 1, arbitrary: loneSurrogate },
  );
  const anyText = fc.string({ unit: anyChar, maxLength: 40 });
  const anyJson = fc.jsonValue({ maxDepth: 3, stringUnit: anyChar });
  const FIELDS = ["model", "prompt", "image_url", "video_url", "audio_url", "duration", "ratio", "resolution", "generate_audio", "watermark"];

  /** A valid body (unicode prompts included) with 0–3 mutations: a field set to anything, removed, or an extra field. */
  const validBody = fc.record(
    {
      model: fc.constantFrom(MODEL, "VideoModel-2.0", "VideoModel-2.0-fast"),
      prompt: fc.oneof(fc.constant("a fox"), fc.string({ unit: "grapheme", minLength: 1, maxLength: 30 })),
      image_url: fc.webUrl(),
      duration: fc.integer({ min: 4, max: 15 }),
      ratio: fc.constantFrom("16:9", "9:16", "1:1", "4:3", "3:4", "21:9"),
      resolution: fc.constant("720p"),
      generate_audio: fc.boolean(),
      watermark: fc.boolean(),
    },
    { requiredKeys: ["model", "prompt"] },
  );
  type Mutation = { set: string; value: unknown } | { remove: string };
  const mutation: fc.Arbitrary<Mutation> = fc.oneof(
    fc.record({ set: fc.constantFrom(...FIELDS), value: anyJson }),
    fc.record({ set: fc.constantFrom("duration"), value: fc.oneof(fc.integer({ min: -2, max: 20 }), fc.double({ min: -1, max: 20 })) }),
    fc.record({ set: fc.constantFrom("model"), value: fc.oneof(fc.constant("VideoModel-9"), anyText) }),
    fc.record({ set: anyText, value: anyJson }),
    fc.record({ remove: fc.constantFrom(...FIELDS) }),
  );
  const nearSchema = fc.tuple(validBody, fc.array(mutation, { maxLength: 3 })).map(([valid, mutations]) => {
    const body: Record<string, unknown> = { ...valid };
    for (const m of mutations) {
      if ("remove" in m) delete body[m.remove];
      // defineProperty, so a generated "__proto__" key becomes a field of the body as JSON.parse would make it.
      else Object.defineProperty(body, m.set, { value: m.value, enumerable: true, writable: true, configurable: true });
    }
    return body;
  });

  /** Valid JSON text with a random edit: the malformed JSON a buggy client really sends. */
  const brokenJson = fc
    .tuple(fc.constantFrom(JSON.stringify(VALID), JSON.stringify({ ...VALID, ratio: "9:16", watermark: true })), fc.nat(), fc.nat({ max: 5 }), anyText)
    .map(([text, at, cut, insert]) => text.slice(0, at % text.length) + insert + text.slice((at % text.length) + cut));

  /** The body as the server reads it: UTF-8 decoded (a lone surrogate's bytes become U+FFFD), then JSON. */
  const parsedByServer = (sent: Buffer): unknown => {
    try {
      return JSON.parse(sent.toString("utf8"));
    } catch {
      return undefined;
    }
  };

  async function checkCreate(sent: Buffer): Promise<void> {
    const answer = await create(sent);
    const parsed = parsedByServer(sent);
    expect([200, 400, 403, 413]).toContain(answer.status);
    const msg = envelope(answer, answer.status);
    // Refusals of an object body name a field (a schema field or one of the body's own keys).
    if (answer.status === 400 && parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)) {
      expect([...FIELDS, ...Object.keys(parsed)].some((field) => msg.includes(field)), msg).toBe(true);
    }
    await expect.poll(healthy).toBe(true);
  }

  it("any JSON value as the create body", async () => {
    await fc.assert(fc.asyncProperty(anyJson, (value) => checkCreate(wtf8(JSON.stringify(value)))), { numRuns: 200 });
  });

  it("any body near the create schema", async () => {
    await fc.assert(fc.asyncProperty(nearSchema, (value) => checkCreate(wtf8(JSON.stringify(value)))), { numRuns: 250 });
  });

  it("any text (control characters, lone surrogates) or bytes as the create body", async () => {
    const body = fc.oneof(anyText.map(wtf8), brokenJson.map(wtf8), fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)));
    await fc.assert(fc.asyncProperty(body, checkCreate), { numRuns: 200 });
  });

  it("any string as the task id", async () => {
    const id = fc.oneof(
      anyText,
      fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }).map(String),
      fc.double().map(String),
      fc.integer({ min: 1, max: 50 }).map(String),
    );
    await fc.assert(
      fc.asyncProperty(id, async (value) => {
        const answer = await call("GET", `${QUERY}?id=${percentEncode(value)}`);
        expect([200, 400, 404]).toContain(answer.status);
        const msg = envelope(answer, answer.status);
        if (!/^[0-9]+$/.test(value)) expect(answer.status).toBe(400);
        if (answer.status === 400) expect(msg).toMatch(/\bid\b/);
        if (answer.status === 200) expect((JSON.parse(answer.text) as { data: { task_id: unknown } }).data.task_id).toBe(Number(value));
        await expect.poll(healthy).toBe(true);
      }),
      { numRuns: 250 },
    );
  });
});
