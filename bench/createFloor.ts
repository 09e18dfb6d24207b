/**
 * The floor of the create path on this machine: the messages a create makes in reelay's design, made by the
 * least code that can make them, with reelay's libraries and their settings. Beside "create accepted" it
 * says how much of a create's cost is the design's (the server, HTTP, the client library, the threads) and how
 * much is reelay's own work (auth, validation, pricing, the ledger's fold, the task machine, metrics, logs).
 * With `--instant`, the floor of a whole task's life on an OpenAI-compatible upstream (the instant suite's).
 *
 * One process of three threads, as `reelay serve`:
 * - main (the edge): node:http; a POST takes the account from its bearer key, writes an opening of a real
 *   opening's size on `floor.<account>.money.<epoch>.task.<id>` guarded over the account's money epoch (one
 *   write in flight per account, the next guarded by its sequence), and answers once the acceptance comes
 *   back on an ordered feed of `floor.*.task.*.upstream`, with its `provider_task_id`. With `--instant` it
 *   also settles: the projector's closes, gathered per account for 100 ms, as one ledger message on the chain.
 * - runner: a durable pull consumer of the openings (held unacked, as a runner holds a live task); for each,
 *   an acceptance of a real one's size on `floor.<account>.task.<id>.upstream`, guarded over the task's
 *   subjects. With `--instant`, first the upstream's create (multipart `POST /v1/videos`), then after the
 *   acceptance its status (`GET /v1/videos/{id}`, done at the first ask), the video (`…/content`) copied into an
 *   object store as reelay copies it (putNewObject), the success on `floor.<account>.task.<id>.state` guarded
 *   after the acceptance, and the opening acknowledged.
 * - projector: a durable pull consumer of the money subjects (the reactors' share of a create), acknowledged
 *   a batch at a time; with `--instant` also of the `state` subjects: a final task's view written once
 *   (a KV create) and its close sent to the edge.
 * Nothing is validated, priced, folded, logged or measured. Not a product: a baseline for `npm run bench`.
 * `node --import tsx bench/createFloor.ts <nats-url> <accounts> [--instant <upstream-url> <upstream-key>]`;
 * prints `PORT <n>` once listening on loopback.
 */
import { createServer, type ServerResponse } from "node:http";
import { isMainThread, MessageChannel, type MessagePort, Worker, workerData } from "node:worker_threads";
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import { Objm } from "@nats-io/obj";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { Pool } from "undici";
import { putNewObject } from "../services/runner/newObject.ts";
import { multipartBody } from "../services/runner/providers/openai/multipartBody.ts";
import { coalesceWrites } from "../services/shared/natsWriteCoalescing.ts";
import { LIVE_PULL } from "../services/shared/liveFeed.ts";
import { openingBytes } from "./lib/benchAccounts.ts";
import { FLOOR_STREAM as STREAM, floorKeys } from "./lib/floorNames.ts";
import { OpeningChain } from "./lib/openingChain.ts";

/** A real acceptance's size (an `UpstreamAccepted` event of a parked task). */
const ACCEPTANCE_BYTES = 190;
/** About a real success's size (`GenerationSucceeded` with its video, tokens and the acceptance's copy). */
const SUCCESS_BYTES = 420;
/** About what one task's close adds to a settlement's ledger message. */
const CLOSE_BYTES = 260;
/** About a final task view's size. */
const VIEW_BYTES = 700;
/** As reelay's settlement: closes wait this long for company, per account. */
const SETTLEMENT_LINGER_MS = 100;
const RUNNERS = "floor_runners";
const REACTORS = "floor_reactors";
const VIDEOS = "floor_videos";
const VIEWS = "floor_views";
const BATCH = 256;

type Role = "runner" | "projector";
/** The upstream of `--instant`: the instant suite's fake OpenAI-compatible video API. */
interface Upstream {
  url: string;
  key: string;
}
interface ThreadData {
  role: Role;
  url: string;
  upstream: Upstream | undefined;
  /** The projector's way to the edge's ledger chains (`--instant`), as reelay's projector closes reservations through the edge. */
  closes: MessagePort | undefined;
}

async function connectFloor(url: string, name: string): Promise<{ nc: NatsConnection; js: JetStreamClient; jsm: JetStreamManager }> {
  const nc = await connect({ servers: url, name, noAsyncTraces: true });
  coalesceWrites(nc);
  return { nc, js: jetstream(nc), jsm: await jetstreamManager(nc) };
}

/** A JSON body of `bytes` bytes (what the server stores and delivers; its content is never read). */
const padded = (fields: Record<string, unknown>, bytes: number): string => {
  const body = JSON.stringify({ ...fields, pad: "" });
  return JSON.stringify({ ...fields, pad: "x".repeat(Math.max(0, bytes - body.length)) });
};

const warnOf = (what: string) => (error: unknown) => process.stderr.write(`floor ${what}: ${String(error)}\n`);

async function runner(url: string, upstream: Upstream | undefined): Promise<void> {
  const { nc, js, jsm } = await connectFloor(url, "floor-runner");
  const messages = await (await js.consumers.get(STREAM, RUNNERS)).consume({ max_messages: BATCH, ...LIVE_PULL });
  const accept = (account: string, taskId: number, providerTaskId: string) =>
    js.publish(`floor.${account}.task.${taskId}.upstream`, padded({ type: "UpstreamAccepted", taskId, providerTaskId }, ACCEPTANCE_BYTES), {
      msgID: `task-${taskId}-v2`,
      expect: { lastSubjectSequence: 0, lastSubjectSequenceSubject: `floor.${account}.task.${taskId}.*` },
    });
  if (upstream === undefined) {
    for await (const msg of messages) {
      const { account, taskId } = msg.json<{ account: string; taskId: number }>();
      // Not awaited one by one: a runner has many tasks under way at once.
      accept(account, taskId, `floor-${taskId}`).catch(warnOf(`runner: acceptance of ${taskId} not written`));
    }
    return;
  }
  // The provider's base URL, as reelay's config names it (its path included: `…/v1`).
  const base = new URL(upstream.url);
  const videos = `${base.pathname.replace(/\/$/, "")}/videos`;
  const pool = new Pool(base.origin, { connections: 128 });
  const headers = { authorization: `Bearer ${upstream.key}` };
  const call = async (method: "GET" | "POST", path: string, body?: { body: Buffer; contentType: string }): Promise<Buffer> => {
    const answer = await pool.request({ method, path, headers: body ? { ...headers, "content-type": body.contentType } : headers, ...(body ? { body: body.body } : {}) });
    const bytes = Buffer.from(await answer.body.arrayBuffer());
    if (answer.statusCode !== 200) throw new Error(`${method} ${path} answered ${answer.statusCode}`);
    return bytes;
  };
  const bucket = { nc, js, jsm, name: VIDEOS };
  for await (const msg of messages) {
    const { account, taskId } = msg.json<{ account: string; taskId: number }>();
    void (async () => {
      const created = JSON.parse((await call("POST", videos, multipartBody([["model", "sora-2"], ["prompt", "instant bench"], ["seconds", "4"], ["size", "720x1280"]]))).toString()) as { id: string };
      const accepted = await accept(account, taskId, created.id);
      await call("GET", `${videos}/${created.id}`);
      const video = await call("GET", `${videos}/${created.id}/content`);
      await putNewObject(bucket, `video-${taskId}`, "", (async function* () {
        yield video;
      })());
      await js.publish(`floor.${account}.task.${taskId}.state`, padded({ type: "GenerationSucceeded", account, taskId }, SUCCESS_BYTES), {
        msgID: `task-${taskId}-v3`,
        expect: { lastSubjectSequence: accepted.seq, lastSubjectSequenceSubject: `floor.${account}.task.${taskId}.*` },
      });
      msg.ack();
    })().catch(warnOf(`runner: task ${taskId} not finished`));
  }
}

async function projector(url: string, closes: MessagePort | undefined): Promise<void> {
  const { js } = await connectFloor(url, "floor-projector");
  const views = closes === undefined ? undefined : await new Kvm(js).open(VIEWS);
  const messages = await (await js.consumers.get(STREAM, REACTORS)).consume({ max_messages: BATCH, ...LIVE_PULL });
  let unacked = 0;
  let writes: Array<Promise<unknown>> = [];
  for await (const msg of messages) {
    const event = msg.json<{ type?: string; account?: string; taskId?: number }>();
    if (views && closes && event.type === "GenerationSucceeded" && event.account !== undefined && event.taskId !== undefined) {
      writes.push(views.create(String(event.taskId), padded({ taskId: event.taskId, status: "success" }, VIEW_BYTES)));
      closes.postMessage({ account: event.account, taskId: event.taskId });
    }
    // Ack-all: the last of what has arrived acknowledges the batch (once its views are written), as the reactors do.
    if (++unacked >= BATCH || messages.getPending() === 0) {
      const batchWrites = writes;
      writes = [];
      unacked = 0;
      void Promise.all(batchWrites).then(() => msg.ack(), warnOf("projector: a view not written"));
    }
  }
}

/** An account's money as it comes, written one message at a time on its chain (one in flight, the next guarded by its answer): openings, and settlements of closes gathered for 100 ms. */
class AccountChain {
  private readonly chain: OpeningChain;
  private writing = false;
  private readonly queue: Array<{ taskId: number; body: string } | { closes: number }> = [];
  private closes = 0;
  private settling: NodeJS.Timeout | undefined;

  constructor(
    js: JetStreamClient,
    account: string,
    private readonly failed: (taskId: number) => void,
  ) {
    this.chain = new OpeningChain(js, `floor.${account}`);
  }

  open(taskId: number, body: string): void {
    this.queue.push({ taskId, body });
    if (!this.writing) void this.drain();
  }

  close(): void {
    this.closes++;
    this.settling ??= setTimeout(() => {
      this.settling = undefined;
      this.queue.push({ closes: this.closes });
      this.closes = 0;
      if (!this.writing) void this.drain();
    }, SETTLEMENT_LINGER_MS);
  }

  private async drain(): Promise<void> {
    this.writing = true;
    for (let next = this.queue.shift(); next !== undefined; next = this.queue.shift()) {
      try {
        if ("closes" in next) await this.chain.publishLedger(padded({ type: "ReservationsClosed", closes: next.closes }, next.closes * CLOSE_BYTES));
        else await this.chain.publish(next.taskId, next.body, `open-${next.taskId}`);
      } catch (error) {
        if ("taskId" in next) this.failed(next.taskId);
        else warnOf("edge: a settlement not written")(error);
      }
    }
    this.writing = false;
  }
}

async function edge(url: string, accounts: number, upstream: Upstream | undefined): Promise<void> {
  const { js, jsm } = await connectFloor(url, "floor-edge");
  const instant = upstream !== undefined;
  await jsm.streams.add({ name: STREAM, subjects: ["floor.>"], allow_direct: true });
  await jsm.consumers.add(STREAM, { durable_name: RUNNERS, filter_subject: "floor.*.money.*.task.*", ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, max_ack_pending: 100_000, ack_wait: 600e9 });
  await jsm.consumers.add(STREAM, {
    durable_name: REACTORS,
    filter_subjects: instant ? ["floor.*.money.>", "floor.*.task.*.state"] : ["floor.*.money.>"],
    ack_policy: AckPolicy.All,
    deliver_policy: DeliverPolicy.All,
    max_ack_pending: 20_000,
  });
  if (instant) {
    await new Objm(js).create(VIDEOS);
    await new Kvm(js).create(VIEWS);
  }
  const chains = new Map<string, AccountChain>();
  const waiting = new Map<number, ServerResponse>();
  const answer = (taskId: number, status: number, body: string) => {
    const res = waiting.get(taskId);
    waiting.delete(taskId);
    res?.writeHead(status, { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }).end(body);
  };
  const chainOf = (account: string): AccountChain => {
    let chain = chains.get(account);
    if (chain === undefined) {
      chain = new AccountChain(js, account, (failedId) => answer(failedId, 503, '{"code":503}'));
      chains.set(account, chain);
    }
    return chain;
  };
  const closes = instant ? new MessageChannel() : undefined;
  closes?.port1.on("message", ({ account }: { account: string }) => chainOf(account).close());
  for (const role of ["runner", "projector"] as const) {
    // A worker does not inherit tsx's loader: it registers it, then loads this file again.
    const load = `import("tsx/esm/api").then(({ register }) => { register(); return import(${JSON.stringify(import.meta.url)}); })`;
    const port = role === "projector" ? closes?.port2 : undefined;
    const data: ThreadData = { role, url, upstream, closes: port };
    new Worker(load, { eval: true, workerData: data, transferList: port ? [port] : [] }).on("error", (error) => {
      process.stderr.write(`floor ${role} failed: ${String(error)}\n`);
      process.exit(1);
    });
  }

  const accountsByKey = new Map(floorKeys(accounts).map((key, index) => [`Bearer ${key}`, `tenant-${index}`]));
  const openingSize = openingBytes();
  let nextTaskId = 1;

  const feed = await (await js.consumers.get(STREAM, { filter_subjects: ["floor.*.task.*.upstream"], deliver_policy: DeliverPolicy.New })).consume({ max_messages: BATCH, ...LIVE_PULL });
  void (async () => {
    for await (const msg of feed) {
      const { taskId, providerTaskId } = msg.json<{ taskId: number; providerTaskId: string }>();
      answer(taskId, 200, JSON.stringify({ code: 200, msg: "success", data: { task_id: taskId, provider_task_id: providerTaskId, status: "pending" } }));
    }
  })();

  const server = createServer({ keepAliveTimeout: 65_000, noDelay: true }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const account = accountsByKey.get(req.headers.authorization ?? "");
      if (account === undefined) return void res.writeHead(401).end();
      const request = JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>;
      const taskId = nextTaskId++;
      waiting.set(taskId, res);
      chainOf(account).open(taskId, padded({ account, taskId, request }, openingSize));
    });
  });
  server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    process.stdout.write(`PORT ${typeof address === "object" && address ? address.port : 0}\n`);
  });
  // The suite goes on with the same server: the floor's messages go with it.
  process.on("SIGTERM", () => {
    const removed = [jsm.streams.delete(STREAM), ...(instant ? [jsm.streams.delete(`OBJ_${VIDEOS}`), jsm.streams.delete(`KV_${VIEWS}`)] : [])];
    void Promise.allSettled(removed).finally(() => process.exit(0));
  });
}

if (isMainThread) {
  const [url, accounts, flag, upstreamUrl, upstreamKey] = process.argv.slice(2);
  if (!url || (flag !== undefined && (flag !== "--instant" || !upstreamUrl || !upstreamKey))) {
    process.stderr.write("usage: createFloor.ts <nats-url> [accounts] [--instant <upstream-url> <upstream-key>]\n");
    process.exit(2);
  }
  await edge(url, Number(accounts ?? 20), upstreamUrl && upstreamKey ? { url: upstreamUrl, key: upstreamKey } : undefined);
} else {
  const { role, url, upstream, closes } = workerData as ThreadData;
  await (role === "runner" ? runner(url, upstream) : projector(url, closes));
}
