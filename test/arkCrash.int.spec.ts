import type { ChildProcess } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArkUpstream } from "./fakes/arkUpstream.ts";
import { addArk } from "./helpers/arkChannels.ts";
import { killHard, startChildService, writeConfigFile } from "./helpers/childService.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

/**
 * Ark keeps no idempotency key, so a second create is a second billable task. A runner killed with SIGKILL
 * after sending the create and before recording Ark's answer must not make the next runner create again:
 * it finds the task by the reference it sent (`safety_identifier`) in Ark's task list.
 */
describe("a runner killed between Ark's create and recording it", () => {
  const ark = new ArkUpstream("ark-crash-key");
  let app: TestApp;
  let configPath: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    // The edge in this process refuses models whose channels have no key: it reads the same variable.
    process.env.ARK_CRASH_KEY = "ark-crash-key";
    await ark.start();
    app = await startTestApp({
      services: ["edge", "projector"],
      tweak: (config) => {
        config.runner.leaseMs = 1500;
        config.limits.submitWaitMs = 200;
        addArk(config, { ark: { baseUrl: ark.baseUrl, apiKeyEnv: "ARK_CRASH_KEY" } }, { Seedance: { provider: "ark" } });
      },
    });
    configPath = writeConfigFile(app.config);
  });
  afterAll(async () => {
    await Promise.all(children.map(killHard));
    await app?.stop();
    await ark.stop();
  });

  const runner = async () => {
    const child = await startChildService(["runner"], { NATS_URL: app.natsUrl, REELAY_CONFIG: configPath, ARK_CRASH_KEY: "ark-crash-key" });
    children.push(child);
    return child;
  };

  it("the next runner finds the task at Ark: exactly one create, the task succeeds, billed once", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("crash", 100));
    const doomed = await runner();
    ark.scriptCreates("hang");
    ark.generation = { kind: "succeed", afterPolls: 2 };
    const { body } = await client.create({ model: "Seedance", prompt: "a fox", duration: 5 });
    const taskId = body.data?.task_id as number;
    // Ark has the task; its answer never reaches the runner, which dies now.
    await expect.poll(() => ark.createsFor(`reelay-task-${taskId}`).length, { timeout: 10_000 }).toBe(1);
    await killHard(doomed);
    await runner();

    const final = await client.waitForFinal(taskId, 30_000);
    expect(final.body.data).toMatchObject({ status: "success", total_tokens: 108_900 });
    expect(ark.createsFor(`reelay-task-${taskId}`)).toHaveLength(1);
    expect(ark.lists.length).toBeGreaterThanOrEqual(1);
    expect(final.body.data?.provider_task_id).toBe([...ark.tasks.keys()][0]);
    // 108,900 tokens at 46 ¥ per million, charged once.
    await expect.poll(async () => (await app.ledger.current("crash")).balanceMicros, { timeout: 5_000 }).toBe(100_000_000 - 5_009_400);
  });
});
