import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as natsConnect } from "@nats-io/transport-node";
import { DeliverPolicy, jetstream } from "@nats-io/jetstream";
import { TaskEvent } from "../../contracts/videoTask.ts";
import { startNatsServer } from "../../infra/natsServer.ts";
import { STREAMS } from "../../infra/jetstreamLayout.ts";
import { ApiKeyStore } from "../../services/shared/apiKeys.ts";
import { connectNats } from "../../services/shared/nats.ts";
import { statusChangeOf } from "../../services/tasks/statusChanges.ts";
import { instantVideoUpstream } from "../lib/instantVideoUpstream.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";
import type { BenchRow } from "../table.ts";
import { TASK_LOG_SUBJECTS } from "../../contracts/videoTask.ts";
import { taskMessageBody } from "../../services/shared/taskLog.ts";

const SUITE = "events";
const STREAMS_OPEN = 10_000;
/**
 * Streams of the account whose tasks run, every one timed; the other streams belong to OTHER_ACCOUNTS other
 * accounts (as on a gateway with many customers, each following its own account) and stay idle but open.
 */
const TIMED_STREAMS = 50;
const OTHER_ACCOUNTS = 200;
const TASKS = 20;

const suiteStart = performance.now();
const say = (line: string) => process.stderr.write(`[${SUITE} +${((performance.now() - suiteStart) / 1000).toFixed(1)}s] ${line}\n`);

const rssMiB = (pid: number) => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? Number.NaN) / 1024;
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};

/**
 * 10,000 open account event streams on one edge (its memory), then tasks whose status changes reach the
 * streams and a webhook receiver: how long after its event was appended each arrives (p50/p99). The time
 * of append is when this process's own ordered consumer of TASKS sees the event (an upper bound of the
 * append, so the latencies are, if anything, understated by the consumer's own delay of well under 1 ms).
 */
export async function taskEventsBench(): Promise<BenchRow[]> {
  const workDir = mkdtempSync(join(tmpdir(), "reelay-bench-events-"));
  const sockets: Socket[] = [];
  const stops: Array<() => Promise<unknown>> = [];
  try {
    const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say });
    stops.push(() => nats.stop());
    // Tasks run on a fake OpenAI-compatible video upstream (test/fakes): instant and CPU-free, so what is
    // measured is the event path, not ffmpeg taking both cores.
    const { upstream, config, env } = await instantVideoUpstream({ pollEveryMs: 100 });
    stops.push(() => upstream.stop());
    config.webhooks.allowHttp = true;
    config.webhooks.allowPrivateAddresses = true;
    const key = await prepareAccount(nats.url, workDir, config);
    const reelay = await startReelay({ natsUrl: nats.url, config, workDir, env });
    stops.push(() => reelay.proc.stop(10_000));
    const port = Number(new URL(reelay.baseUrl).port);

    const appended = new Map<string, number>();
    const nc = await natsConnect({ servers: nats.url });
    stops.push(() => nc.close());
    const consumer = await jetstream(nc).consumers.get(STREAMS.events.name, { filter_subjects: [...TASK_LOG_SUBJECTS], deliver_policy: DeliverPolicy.New });
    const feed = await consumer.consume();
    void (async () => {
      for await (const msg of feed) {
        const event = TaskEvent.safeParse(taskMessageBody(msg.json()));
        const status = event.success ? statusChangeOf(event.data) : undefined;
        if (event.success && status) appended.set(`${event.data.meta.taskId}:${status}`, performance.now());
      }
    })();

    const hooked: Array<{ key: string; at: number }> = [];
    const receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (chunk: Buffer) => chunks.push(chunk));
      req.on("end", () => {
        const at = performance.now();
        const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { data: { task_id: number; status: string } };
        hooked.push({ key: `${body.data.task_id}:${body.data.status}`, at });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    stops.push(() => new Promise((resolve) => receiver.close(resolve)));
    const callback = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;

    say(`opening ${STREAMS_OPEN} account event streams (${TIMED_STREAMS} of the tasks' account, the rest of ${OTHER_ACCOUNTS} others)`);
    const otherKeys = await otherAccountKeys(nats.url);
    const streamed: Array<{ key: string; at: number }> = [];
    const requestFor = (apiKey: string) => `GET /api/compat/videosTasks/events HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer ${apiKey}\r\n\r\n`;
    const rssBefore = rssMiB(reelay.proc.pid);
    for (let wave = 0; wave < STREAMS_OPEN; wave += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, STREAMS_OPEN - wave) }, (_, k) => {
          // Spread over the whole set: the hub reaches listeners in the order they subscribed.
          const timed = (wave + k) % (STREAMS_OPEN / TIMED_STREAMS) === 0;
          const request = requestFor(timed ? key : (otherKeys[(wave + k) % otherKeys.length] as string));
          return new Promise<void>((resolve, reject) => {
            const socket = connect(port, "127.0.0.1");
            sockets.push(socket);
            let text = "";
            socket.on("data", (chunk) => {
              if (!timed) return resolve();
              const at = performance.now();
              text += chunk.toString("utf8");
              for (const match of text.matchAll(/data: \{"task_id":(\d+),"status":"(\w+)"/g)) streamed.push({ key: `${match[1]}:${match[2]}`, at });
              text = text.slice(text.lastIndexOf("\n\n") + 2);
              resolve();
            });
            socket.once("error", reject);
            socket.write(request);
          });
        }),
      );
    }
    const rssOpen = rssMiB(reelay.proc.pid);
    say(`${STREAMS_OPEN} streams open; reelay RSS ${rssOpen.toFixed(0)} MiB`);

    const body = JSON.stringify({ model: "VideoModel-2.0-mini", prompt: "events bench", duration: 4, generate_audio: false, callback_url: callback });
    // A task every 200 ms: events come as a steady trickle with some overlap, as from a busy account.
    for (let i = 0; i < TASKS; i++) {
      await fetch(`${reelay.baseUrl}/api/compat/videosGenerations`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body });
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const deadline = Date.now() + 60_000;
    while (hooked.filter((h) => h.key.endsWith(":success")).length < TASKS && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const rssAfter = rssMiB(reelay.proc.pid);
    const delays = (arrivals: Array<{ key: string; at: number }>) =>
      arrivals.flatMap(({ key: k, at }) => {
        const from = appended.get(k);
        return from === undefined ? [] : [Math.max(0, at - from)];
      });
    const sse = delays(streamed);
    const hooks = delays(hooked);
    say(`SSE deliveries timed: ${sse.length}, webhooks: ${hooks.length}`);
    return [
      { suite: SUITE, metric: "account event streams open on one edge", value: sockets.length, unit: "streams" },
      { suite: SUITE, metric: `reelay serve RSS with ${STREAMS_OPEN} streams open (before: ${rssBefore.toFixed(0)} MiB)`, value: Math.max(rssOpen, rssAfter), unit: "MiB", target: "<= 1024" },
      { suite: SUITE, metric: `event → SSE client p50 (its account's ${TIMED_STREAMS} streams among ${STREAMS_OPEN})`, value: percentile(sse, 50), unit: "ms" },
      { suite: SUITE, metric: "event → SSE client p99", value: percentile(sse, 99), unit: "ms", target: "<= 50" },
      { suite: SUITE, metric: "event → webhook p50", value: percentile(hooks, 50), unit: "ms" },
      { suite: SUITE, metric: "event → webhook p99", value: percentile(hooks, 99), unit: "ms", target: "<= 50" },
    ];
  } finally {
    for (const socket of sockets) socket.destroy();
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    rmSync(workDir, { recursive: true, force: true });
  }
}

/** One key for each of OTHER_ACCOUNTS accounts, made through the key store itself (a CLI call each would take minutes). */
async function otherAccountKeys(natsUrl: string): Promise<string[]> {
  const nats = await connectNats(natsUrl, "bench-keys");
  try {
    const store = new ApiKeyStore(nats.apiKeys);
    const keys: string[] = [];
    for (let i = 0; i < OTHER_ACCOUNTS; i++) keys.push((await store.create(`other-${i}`)).key);
    return keys;
  } finally {
    await nats.nc.close();
  }
}
