import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { arkSampleVideo } from "./arkUpstream.ts";

/**
 * What every fake vendor shares: the HTTP server, the life of a task (queued → running → an end, one step per
 * status call), result addresses that expire and serve a real H.264 MP4, counting what reached the vendor, and
 * the trouble tests ask for. Each vendor's fake (dashscopeUpstream.ts, klingUpstream.ts, …) speaks its own
 * paths, auth, fields, statuses and error bodies on top. Test-only: never wired into the product.
 *
 * Trouble is asked for per task, in the prompt, so tests of one vendor can run at once without sharing
 * knobs: `#fail`, `#moderated` (the finished video is blocked), `#never`, `#moderation` (refused at create),
 * `#quota` (the account is out of money), `#429x<n>` and `#500x<n>` (the first n creates with this prompt
 * answer so), `#lose-answer` (the task is created and the connection dropped), `#break-download` (the first
 * result download is cut off), `#poll-errors` (the first two status calls answer 429 then 500), `#no-video`
 * (finishes "successfully" without a video), `#odd-status` (one status call shows a status the vendor does
 * not document). Instance-wide: `down` (every call answers 500), `outOfQuota`.
 */

export type FakeEnd = "succeeded" | "failed" | "moderated" | "noVideo";
export type FakeStatus = "queued" | "running" | "odd" | FakeEnd | "cancelled";

export interface FakeTask<Body = unknown> {
  id: string;
  body: Body;
  prompt: string;
  /** The caller's own reference for the task, where the vendor keeps one. */
  reference?: string;
  status: FakeStatus;
  polls: number;
  createdAt: number;
  finishedAt?: number;
  /** What this task becomes when it ends. */
  end: FakeEnd | "never";
  /** Anything a vendor's fake keeps per task (the create endpoint's family, the result's file id). */
  extra: Record<string, string>;
}

export type CreateTrouble = "429" | "500" | "moderation" | "quota" | "loseAnswer";

/** Status calls before a task ends: queued on the first, running after. */
const POLLS_TO_FINISH = 2;

const has = (prompt: string, directive: string) => prompt.includes(`#${directive}`);

export abstract class FakeVendor<Body = unknown> {
  readonly tasks = new Map<string, FakeTask<Body>>();
  /** Create bodies that reached the vendor, accepted or not, in order. */
  readonly createBodies: Body[] = [];
  /** Every API call as `METHOD path` (result downloads not included). */
  readonly calls: string[] = [];
  /** While true, every call answers the vendor's 5xx. */
  down = false;
  /** While true, every create answers the vendor's balance error. */
  outOfQuota = false;
  /** Result addresses stop working this long after the task ended. */
  resultLifetimeMs = 60 * 60_000;
  inFlight = 0;
  inFlightPeak = 0;
  baseUrl = "";
  protected origin = "";
  private server: Server | undefined;
  private readonly createTroubleSeen = new Map<string, number>();
  private readonly brokenDownloads = new Set<string>();
  private readonly pollErrorsGiven = new Map<string, number>();

  /** The path under the origin where the vendor's API lives (`/api/v1` for DashScope), empty for none. */
  protected abstract readonly basePath: string;
  /** Answers one API call (paths, auth and bodies are the vendor's). */
  protected abstract handle(req: IncomingMessage, url: URL, body: string, res: ServerResponse): Promise<void> | void;
  /** The vendor's answer for an internal error, as `[status, body]`. */
  protected abstract internalError(): [number, unknown];

  async start(): Promise<void> {
    arkSampleVideo();
    this.server = createServer((req, res) => {
      void this.serve(req, res).catch((error: unknown) => {
        if (!res.headersSent) {
          const [status, body] = this.internalError();
          this.send(res, status, body);
        }
        console.error("fake vendor:", error);
      });
    });
    this.server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    this.origin = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    this.baseUrl = `${this.origin}${this.basePath}`;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** Creates that reached the vendor with this prompt (accepted or refused). */
  createsWithPrompt(prompt: string): Body[] {
    return this.createBodies.filter((body) => this.promptOf(body) === prompt);
  }

  /** Tasks the vendor created for this prompt. */
  tasksWithPrompt(prompt: string): Array<FakeTask<Body>> {
    return [...this.tasks.values()].filter((task) => task.prompt === prompt);
  }

  /** The prompt in a create body (each vendor puts it elsewhere). */
  protected abstract promptOf(body: Body): string;

  protected send(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    if (res.destroyed) return;
    res.writeHead(status, { "content-type": "application/json; charset=utf-8", ...headers });
    res.end(JSON.stringify(body));
  }

  /**
   * The trouble a create with this prompt meets now, if any: instance-wide first, then the prompt's
   * directives (`#429x2` answers 429 to the first two creates with that prompt).
   */
  protected createTrouble(prompt: string): CreateTrouble | undefined {
    if (this.outOfQuota || has(prompt, "quota")) return "quota";
    if (has(prompt, "moderation")) return "moderation";
    const seen = this.createTroubleSeen.get(prompt) ?? 0;
    this.createTroubleSeen.set(prompt, seen + 1);
    const storms = [...prompt.matchAll(/#(429|500)x(\d+)/g)].flatMap((match) => Array<"429" | "500">(Number(match[2])).fill(match[1] as "429" | "500"));
    if (seen < storms.length) return storms[seen];
    if (has(prompt, "lose-answer") && seen === storms.length) return "loseAnswer";
    return undefined;
  }

  /** Records a new task (call after the create passed validation and trouble). */
  protected createTask(body: Body, id: string, extra: Record<string, string> = {}, reference?: string): FakeTask<Body> {
    const prompt = this.promptOf(body);
    const end: FakeTask["end"] = has(prompt, "never") ? "never" : has(prompt, "moderated") ? "moderated" : has(prompt, "no-video") ? "noVideo" : has(prompt, "fail") ? "failed" : "succeeded";
    const task: FakeTask<Body> = { id, body, prompt, status: "queued", polls: 0, createdAt: Date.now(), end, extra, ...(reference === undefined ? {} : { reference }) };
    this.tasks.set(id, task);
    this.inFlight++;
    this.inFlightPeak = Math.max(this.inFlightPeak, this.inFlight);
    if (has(prompt, "break-download")) this.brokenDownloads.add(id);
    return task;
  }

  /** A status call's trouble for this task (`#poll-errors`: 429, then 500), if any. */
  protected pollTrouble(task: FakeTask<Body>): "429" | "500" | undefined {
    if (!has(task.prompt, "poll-errors")) return undefined;
    const given = this.pollErrorsGiven.get(task.id) ?? 0;
    this.pollErrorsGiven.set(task.id, given + 1);
    return given === 0 ? "429" : given === 1 ? "500" : undefined;
  }

  /** One status call's worth of progress: queued on the first, then running, then the task's end. */
  protected advance(task: FakeTask<Body>): void {
    if (task.status === "odd") task.status = "running";
    if (task.status !== "queued" && task.status !== "running") return;
    task.polls++;
    if (task.end === "never") return;
    if (task.polls === 2 && has(task.prompt, "odd-status")) {
      task.status = "odd";
      return;
    }
    if (task.polls >= POLLS_TO_FINISH + (has(task.prompt, "odd-status") ? 1 : 0)) this.finish(task, task.end);
    else if (task.polls > 1) task.status = "running";
  }

  protected finish(task: FakeTask<Body>, end: FakeEnd | "cancelled"): void {
    if (task.status !== "queued" && task.status !== "running" && task.status !== "odd") return;
    task.status = end;
    task.finishedAt = Date.now();
    this.inFlight--;
  }

  /** A signed, expiring address of the task's result on this server. */
  protected resultUrl(task: FakeTask<Body>): string {
    const expires = (task.finishedAt ?? Date.now()) + this.resultLifetimeMs;
    return `${this.origin}/results/${encodeURIComponent(task.id)}.mp4?Expires=${expires}&Signature=${randomBytes(8).toString("hex")}`;
  }

  /** Whether a result download may go ahead (Veo's needs the key); a vendor's fake answers the refusal itself. */
  protected downloadAllowed(_req: IncomingMessage, _res: ServerResponse): boolean {
    return true;
  }

  protected async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://fake");
    const body = await readBody(req);
    if (url.pathname.startsWith("/results/")) return this.download(req, url, res);
    this.calls.push(`${req.method} ${url.pathname}`);
    if (this.down) {
      const [status, error] = this.internalError();
      return this.send(res, status, error);
    }
    await this.handle(req, url, body, res);
  }

  /** Serves a result: 403 once expired (as signed storage answers), cut off mid-body when the task asks for it. */
  protected download(req: IncomingMessage, url: URL, res: ServerResponse): void {
    if (!this.downloadAllowed(req, res)) return;
    const id = decodeURIComponent(url.pathname.slice("/results/".length).replace(/\.mp4$/, ""));
    const expires = Number(url.searchParams.get("Expires") ?? Number.POSITIVE_INFINITY);
    if (!this.tasks.has(id) || Date.now() > expires) {
      res.writeHead(403, { "content-type": "application/xml" });
      res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>');
      return;
    }
    const video = arkSampleVideo();
    res.writeHead(200, { "content-type": "video/mp4", "content-length": String(video.length) });
    if (this.brokenDownloads.delete(id)) {
      res.write(video.subarray(0, 1024));
      setTimeout(() => res.destroy(), 10);
      return;
    }
    res.end(video);
  }
}

export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};
