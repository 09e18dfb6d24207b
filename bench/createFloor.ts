/**
 * The floor of the create path on this machine: the messages a create makes in reelay's design, made by the
 * least code that can make them, with reelay's libraries and their settings. Beside "create accepted" it
 * says how much of a create's cost is the design's (the server, HTTP, the client library, the threads) and how
 * much is reelay's own work (auth, validation, pricing, the ledger's fold, the task machine, metrics, logs).
 *
 * One process of three threads, as `reelay serve`:
 * - main (the edge): node:http; a POST takes the account from its bearer key, writes an opening of a real
 *   opening's size on `floor.<account>.money.<epoch>.task.<id>` guarded over the account's money epoch (one
 *   write in flight per account, the next guarded by its sequence), and answers once the acceptance comes
 *   back on an ordered feed of `floor.*.task.*.upstream`, with its `provider_task_id`.
 * - runner: a durable pull consumer of the openings (held unacked, as a runner holds a live task); for each,
 *   an acceptance of a real one's size on `floor.<account>.task.<id>.upstream`, guarded over the task's subjects.
 * - projector: a durable pull consumer of the money subjects (the reactors' share of a create), acknowledged
 *   a batch at a time.
 * Nothing is validated, priced, folded, logged or measured. Not a product: a baseline for `npm run bench`.
 * `node --import tsx bench/createFloor.ts <nats-url> <accounts>`; prints `PORT <n>` once listening on loopback.
 */
import { createServer, type ServerResponse } from "node:http";
import { isMainThread, Worker, workerData } from "node:worker_threads";
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type JetStreamClient } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { coalesceWrites } from "../services/shared/natsWriteCoalescing.ts";
import { LIVE_PULL } from "../services/shared/liveFeed.ts";
import { openingBytes } from "./lib/benchAccounts.ts";
import { OpeningChain } from "./lib/openingChain.ts";

const STREAM = "FLOOR";
/** A real acceptance's size (an `UpstreamAccepted` event of a parked task). */
const ACCEPTANCE_BYTES = 190;
const RUNNERS = "floor_runners";
const REACTORS = "floor_reactors";
const BATCH = 256;

type Role = "runner" | "projector";

async function connectFloor(url: string, name: string): Promise<{ nc: NatsConnection; js: JetStreamClient }> {
  const nc = await connect({ servers: url, name, noAsyncTraces: true });
  coalesceWrites(nc);
  return { nc, js: jetstream(nc) };
}

/** A JSON body of `bytes` bytes (what the server stores and delivers; its content is never read). */
const padded = (fields: Record<string, unknown>, bytes: number): string => {
  const body = JSON.stringify({ ...fields, pad: "" });
  return JSON.stringify({ ...fields, pad: "x".repeat(Math.max(0, bytes - body.length)) });
};

async function runner(url: string): Promise<void> {
  const { js } = await connectFloor(url, "floor-runner");
  const messages = await (await js.consumers.get(STREAM, RUNNERS)).consume({ max_messages: BATCH, ...LIVE_PULL });
  for await (const msg of messages) {
    const { account, taskId } = msg.json<{ account: string; taskId: number }>();
    const body = padded({ type: "UpstreamAccepted", taskId, providerTaskId: `floor-${taskId}` }, ACCEPTANCE_BYTES);
    // Not awaited one by one: a runner has many tasks under way at once.
    js.publish(`floor.${account}.task.${taskId}.upstream`, body, { msgID: `task-${taskId}-v2`, expect: { lastSubjectSequence: 0, lastSubjectSequenceSubject: `floor.${account}.task.${taskId}.*` } }).catch((error: unknown) => {
      process.stderr.write(`floor runner: acceptance of ${taskId} not written: ${String(error)}\n`);
    });
  }
}

async function projector(url: string): Promise<void> {
  const { js } = await connectFloor(url, "floor-projector");
  const messages = await (await js.consumers.get(STREAM, REACTORS)).consume({ max_messages: BATCH, ...LIVE_PULL });
  let unacked = 0;
  for await (const msg of messages) {
    msg.json();
    // Ack-all: the last of what has arrived acknowledges the batch, as the reactors do.
    if (++unacked >= BATCH || messages.getPending() === 0) {
      msg.ack();
      unacked = 0;
    }
  }
}

/** An account's openings as they come, written one at a time on its chain (one in flight, the next guarded by its answer). */
class AccountChain {
  private readonly chain: OpeningChain;
  private writing = false;
  private readonly queue: Array<{ taskId: number; body: string }> = [];

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

  private async drain(): Promise<void> {
    this.writing = true;
    for (let next = this.queue.shift(); next !== undefined; next = this.queue.shift()) {
      try {
        await this.chain.publish(next.taskId, next.body, `open-${next.taskId}`);
      } catch {
        this.failed(next.taskId);
      }
    }
    this.writing = false;
  }
}

async function edge(url: string, accounts: number): Promise<void> {
  const { nc, js } = await connectFloor(url, "floor-edge");
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: STREAM, subjects: ["floor.>"], allow_direct: true });
  await jsm.consumers.add(STREAM, { durable_name: RUNNERS, filter_subject: "floor.*.money.*.task.*", ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, max_ack_pending: 100_000, ack_wait: 600e9 });
  await jsm.consumers.add(STREAM, { durable_name: REACTORS, filter_subject: "floor.*.money.>", ack_policy: AckPolicy.All, deliver_policy: DeliverPolicy.All, max_ack_pending: 20_000 });
  for (const role of ["runner", "projector"] as const) {
    // A worker does not inherit tsx's loader: it registers it, then loads this file again.
    const load = `import("tsx/esm/api").then(({ register }) => { register(); return import(${JSON.stringify(import.meta.url)}); })`;
    new Worker(load, { eval: true, workerData: { role, url } }).on("error", (error) => {
      process.stderr.write(`floor ${role} failed: ${String(error)}\n`);
      process.exit(1);
    });
  }

  const waiting = new Map<number, ServerResponse>();
  const answer = (taskId: number, status: number, body: string) => {
    const res = waiting.get(taskId);
    waiting.delete(taskId);
    res?.writeHead(status, { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) }).end(body);
  };
  const accountsByKey = new Map(Array.from({ length: accounts }, (_, index) => [`Bearer floor-${index}`, `tenant-${index}`]));
  const chains = new Map<string, AccountChain>();
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
      let chain = chains.get(account);
      if (chain === undefined) {
        chain = new AccountChain(js, account, (failedId) => answer(failedId, 503, '{"code":503}'));
        chains.set(account, chain);
      }
      chain.open(taskId, padded({ account, taskId, request }, openingSize));
    });
  });
  server.listen(0, "127.0.0.1", () => {
    const address = server.address();
    process.stdout.write(`PORT ${typeof address === "object" && address ? address.port : 0}\n`);
  });
  // The suite goes on with the same server: the floor's messages go with it.
  process.on("SIGTERM", () => void jsm.streams.delete(STREAM).finally(() => process.exit(0)));
}

if (isMainThread) {
  const [url, accounts] = process.argv.slice(2);
  if (!url) {
    process.stderr.write("usage: createFloor.ts <nats-url> [accounts]\n");
    process.exit(2);
  }
  await edge(url, Number(accounts ?? 20));
} else {
  const { role, url } = workerData as { role: Role; url: string };
  await (role === "runner" ? runner(url) : projector(url));
}
