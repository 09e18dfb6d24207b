import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { CONSUMERS, STREAMS } from "../infra/jetstreamLayout.ts";
import { writeConfigFile } from "./helpers/childService.ts";
import { testConfig } from "./helpers/testApp.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";

const run = promisify(execFile);
const CLI = new URL("../scripts/reelay.mjs", import.meta.url).pathname;

describe("the stream layout changes only when asked", () => {
  const suite = natsPerSuite("layout-test", 30_000);
  /** A config whose runner lease (the consumers' ack wait) differs from the one the layout was made with. */
  const otherLease = writeConfigFile(testConfig((config) => (config.runner.leaseMs = 7_000)));
  const reelay = async (...args: string[]) =>
    (await run(process.execPath, [CLI, ...args], { env: { ...process.env, NATS_URL: suite.url, REELAY_CONFIG: otherLease } })).stdout;
  const ackWaitSeconds = async () => ((await suite.nats.jsm.consumers.info(STREAMS.events.name, CONSUMERS.runners)).config.ack_wait ?? 0) / 1e9;


  it("a CLI call with another lease leaves existing consumers as they are", async () => {
    await reelay("accounts", "list");
    expect(await ackWaitSeconds()).toBe(30);
  });

  it("`reelay infra plan` shows each difference and changes nothing", async () => {
    // A store made before the webhook jobs' pending bound went (2026-11-27): the plan lifts it.
    await suite.nats.jsm.consumers.update(STREAMS.webhookJobs.name, CONSUMERS.webhooks, { max_ack_pending: 20_000 });
    const shown = await reelay("infra", "plan");
    expect(shown).toContain(`consumer ${STREAMS.webhookJobs.name}/${CONSUMERS.webhooks}: max_ack_pending 20000 → -1`);
    expect(shown).toContain(`consumer ${STREAMS.events.name}/${CONSUMERS.runners}: ack_wait 30s → 7s`);
    expect(shown).toContain(`consumer ${STREAMS.events.name}/${CONSUMERS.taskLogReactors}: ack_wait 30s → 7s`);
    // The store was made without a retention; the config's videos.retentionDays (30) is a planned change.
    expect(shown).toMatch(/OBJ_videos: max_age .*→/);
    expect(await ackWaitSeconds()).toBe(30);
  });

  it("`reelay infra apply` shows the differences, applies them, and then there is nothing left to change", async () => {
    const shown = await reelay("infra", "apply");
    expect(shown).toContain("ack_wait 30s → 7s");
    expect(shown).toMatch(/applied \d+ changes/);
    expect(await ackWaitSeconds()).toBe(7);
    expect((await suite.nats.jsm.consumers.info(STREAMS.webhookJobs.name, CONSUMERS.webhooks)).config.max_ack_pending).toBe(-1);
    expect((await suite.nats.jsm.streams.info("OBJ_videos")).config.max_age).toBe(30 * 24 * 60 * 60 * 1e9);
    expect(await reelay("infra", "plan")).toContain("nothing to change");
  });
});
