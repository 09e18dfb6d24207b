import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { subscribeTaskEvents, type TaskEventRecord } from "../services/tasks/taskEvents.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

const CLI = new URL("../scripts/reelay.mjs", import.meta.url).pathname;

/** Internal subscribers: the typed task-event iterator and `reelay tasks watch`. */
describe("task events for internal subscribers", () => {
  let app: TestApp;
  const taskIds: Record<string, number> = {};

  beforeAll(async () => {
    app = await startTestApp({ providers: () => new ScriptedVendor() });
    for (const account of ["north", "south"]) {
      const client = new VideoClient(app.baseUrl, await app.keyFor(account, 100));
      const created = await client.create({ model: "VideoModel-2.0-mini", prompt: `a fox for ${account}`, duration: 4 });
      taskIds[account] = created.body.data?.task_id as number;
      await client.waitForFinal(taskIds[account] as number, 10_000, 20);
    }
  });
  afterAll(async () => app?.stop());

  const collect = async (options: Parameters<typeof subscribeTaskEvents>[1], until: (r: TaskEventRecord) => boolean) => {
    const stop = new AbortController();
    const records: TaskEventRecord[] = [];
    for await (const record of subscribeTaskEvents(app.nats, { ...options, signal: stop.signal })) {
      records.push(record);
      if (until(record)) stop.abort();
    }
    return records;
  };

  it("follows one account's tasks, typed and validated, with sequences to resume from", async () => {
    const records = await collect({ from: 1, account: "south" }, (r) => r.event.type === "GenerationSucceeded");
    expect(records.every((r) => r.account === "south" && r.event.meta.taskId === taskIds.south)).toBe(true);
    expect(records.map((r) => r.event.type)).toEqual(["TaskSubmitted", "UpstreamAccepted", "GenerationSucceeded"]);
    const sequences = records.map((r) => r.sequence);
    expect([...sequences].sort((a, b) => a - b)).toEqual(sequences);

    // Resuming from a record's sequence starts exactly there.
    const resumed = await collect({ from: records[2]?.sequence as number, account: "south" }, (r) => r.event.type === "GenerationSucceeded");
    expect(resumed.map((r) => r.sequence)).toEqual(sequences.slice(2));
  });

  it("filters by event type across accounts", async () => {
    const records = await collect({ from: 1, types: ["GenerationSucceeded"] }, (r) => r.account === "south");
    expect(records.map((r) => [r.account, r.event.type])).toEqual([
      ["north", "GenerationSucceeded"],
      ["south", "GenerationSucceeded"],
    ]);
  });

  it("when the subscription's consumer is lost under it, then it goes on from the event after the last one handed out, each once", async () => {
    const north = await collect({ from: 1, account: "north" }, (r) => r.event.type === "GenerationSucceeded");
    const records: TaskEventRecord[] = [];
    const stop = new AbortController();
    for await (const record of subscribeTaskEvents(app.nats, { from: 1, account: "north", signal: stop.signal })) {
      records.push(record);
      if (records.length === 1) {
        // The reader still holds the first event: every consumer without a durable name is this subscription's.
        for await (const info of app.nats.jsm.consumers.list("EVENTS")) if (!info.config.durable_name) await app.nats.jsm.consumers.delete("EVENTS", info.name);
      }
      if (record.event.type === "GenerationSucceeded") stop.abort();
    }
    expect(records.map((r) => r.sequence)).toEqual(north.map((r) => r.sequence));
  });

  it("reelay tasks watch prints an account's events as lines a person reads", async () => {
    const child = spawn(process.execPath, [CLI, "tasks", "watch", "--account", "north", "--from", "1"], {
      env: { ...process.env, NATS_URL: app.natsUrl },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    await expect.poll(() => output, { timeout: 15_000 }).toMatch(/succeeded/);
    child.kill("SIGINT");
    await new Promise((resolve) => child.once("exit", resolve));
    const lines = output.trim().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(new RegExp(`^\\d+\\t\\S+\\ttask ${taskIds.north}\\tnorth\\tsubmitted VideoModel-2.0-mini 4s 16:9 on local$`));
    expect(lines[2]).toMatch(/succeeded: 1280\*720, 4s, \d+ tokens$/);
  });
});
