import { DeliverPolicy } from "@nats-io/jetstream";
import { locateNatsServer } from "../../infra/natsServerBinary.ts";
import { CONSUMERS, STREAMS } from "../../infra/jetstreamLayout.ts";
import { TASK_LOG_SUBJECTS } from "../../contracts/videoTask.ts";
import type { Nats } from "../../services/shared/nats.ts";
import { finishedTaskMessages } from "../lib/seedTasks.ts";
import { startProjector } from "../../services/projector/main.ts";
import { silentLog, startTestApp } from "../../test/helpers/testApp.ts";
import type { BenchRow } from "../table.ts";

const SUITE = "catchup";
const TASKS = Number(process.env.BENCH_CATCHUP_TASKS ?? 20_000);
const IN_FLIGHT = 2_000;
/** The projector's reactors on the task log (settlement and webhooks run elsewhere). */
const REACTORS = [CONSUMERS.taskLogReactors];
const say = (line: string) => process.stderr.write(`[${SUITE}] ${line}\n`);

/**
 * How fast the read models catch up with a task log they have not seen (a new projector, a rebuild, a
 * backlog after an outage): TASKS finished tasks (TaskSubmitted and GenerationSucceeded, 50 accounts) are
 * written into the task log with no projector running; then `reelay`'s projector starts and the time until
 * the task views, the account index and the dashboard's counters have all acknowledged the last event is
 * taken. Baseline: the same events merely read by an ordered consumer on the same server.
 */
export async function readModelCatchUpBench(): Promise<BenchRow[]> {
  process.env.NATS_SERVER_BIN ??= locateNatsServer({ say }).path;
  const writer = await startTestApp({ services: [] });
  try {
    await writeTasks(writer.nats);
    const { state } = await writer.nats.jsm.streams.info(STREAMS.events.name);
    const raw = await timed(() => rawRead(writer.nats, state.last_seq));
    say(`raw read: ${(state.messages / raw).toFixed(0)} events/s; starting the projector`);
    const projector = await startProjector(writer.nats, writer.config, silentLog);
    try {
      const caughtUp = await timed(() => allAcknowledged(writer.nats, state.last_seq));
      const rate = state.messages / caughtUp;
      return [
        { suite: SUITE, metric: `read models catch up: ${state.messages} task events (views, index, counters)`, value: Math.round(rate), unit: "events/s", baseline: Math.round(state.messages / raw), ratio: rate / (state.messages / raw) },
      ];
    } finally {
      await projector.stop();
    }
  } finally {
    await writer.stop();
  }
}

async function writeTasks(nats: Nats): Promise<void> {
  const at = new Date().toISOString();
  let pending: Array<Promise<unknown>> = [];
  for (let taskId = 1; taskId <= TASKS; taskId++) {
    // 50 accounts in turn: task N is its account's (⌈N/50⌉)th money event.
    const messages = finishedTaskMessages(taskId, `acct-${taskId % 50}`, Math.ceil(taskId / 50), at);
    for (const { subject, body } of messages) pending.push(nats.js.publish(subject, body));
    if (pending.length >= IN_FLIGHT) {
      await Promise.all(pending);
      pending = [];
    }
  }
  await Promise.all(pending);
}

async function rawRead(nats: Nats, lastSeq: number): Promise<void> {
  const consumer = await nats.js.consumers.get(STREAMS.events.name, { deliver_policy: DeliverPolicy.All, filter_subjects: [...TASK_LOG_SUBJECTS] });
  for await (const msg of await consumer.consume({ max_messages: 2048 })) if (msg.seq >= lastSeq) break;
  await consumer.delete().catch(() => undefined);
}

async function allAcknowledged(nats: Nats, lastSeq: number): Promise<void> {
  const deadline = Date.now() + 5 * 60_000;
  for (;;) {
    const floors = await Promise.all(REACTORS.map(async (durable) => (await nats.jsm.consumers.info(STREAMS.events.name, durable)).ack_floor.stream_seq));
    if (floors.every((floor) => floor >= lastSeq)) return;
    if (process.env.BENCH_CATCHUP_DEBUG) say(`floors ${floors.join(" ")}`);
    if (Date.now() > deadline) throw new Error(`read models not caught up after 5 min: ack floors ${floors.join(", ")} of ${lastSeq}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function timed(work: () => Promise<void>): Promise<number> {
  const started = performance.now();
  await work();
  return (performance.now() - started) / 1000;
}
