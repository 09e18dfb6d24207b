import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import type { TaskEvent } from "../contracts/videoTask.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { TaskLog } from "../services/shared/taskLog.ts";
import { TaskActor } from "../services/runner/taskActor.ts";
import type { VideoProvider } from "../services/runner/providers/types.ts";
import { ProviderGate } from "../services/runner/policy/providerGate.ts";
import { sampleJob as job } from "./helpers/fixtures.ts";
import { silentLog } from "./helpers/testApp.ts";
import { startTestNats } from "./helpers/testNats.ts";

/** An upstream that never answers a submit with a decision: every call fails as a network error would. */
function failingUpstream(): VideoProvider & { submits: number } {
  const provider = {
    submits: 0,
    policy: { pollFirstAfterMs: 0, pollEveryMs: 20, pollMaxEveryMs: 20, maxInFlight: 10, submitsPerSecond: 0, timeoutMs: 1_000 },
    submit: async () => {
      provider.submits++;
      throw new Error("connect ECONNRESET");
    },
    status: async () => ({ state: "queued" as const }),
    close: async () => undefined,
  };
  return provider;
}

describe("a task whose upstream submit keeps failing", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nats: Nats;
  beforeAll(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, "actor-deadline", { replicas: 1, leaseMs: 5_000 });
  });
  afterAll(async () => {
    await nats?.nc.close();
    await server?.stop();
  });

  it("is retried until its deadline, then fails with a timeout reason and is queued for release", async () => {
    const taskLog = new TaskLog(nats.js, nats.jsm);
    const upstream = failingUpstream();
    const command = { type: "SubmitVideoTask" as const, taskId: 41, account: "acme", job, ignoredFields: [], receivedAt: new Date().toISOString() };
    const actor = new TaskActor(41, command, {
      nc: nats.nc,
      js: nats.js,
      videos: nats.videos,
      log: silentLog,
      taskLog,
      provider: upstream,
      gate: new ProviderGate(upstream.policy),
      maxTaskMs: 1_500,
      maxResultBytes: 1_000_000,
      allowPrivateResultAddresses: true,
      shutdown: new AbortController().signal,
    });

    expect(await actor.run(false)).toBe("final");

    expect(upstream.submits).toBeGreaterThan(1);
    const { events } = await taskLog.read(41);
    expect(events.map((event: TaskEvent) => event.type)).toEqual(["TaskSubmitted", "SubmitIntended", "GenerationFailed"]);
    expect(events[2]?.data).toEqual({ reason: "timed out: not finished within 1.5 seconds", stage: "timeout" });
    const settlement = await nats.jsm.streams.getMessage(STREAMS.settlements.name, { last_by_subj: STREAMS.settlements.subjects[0] });
    expect(settlement?.json()).toMatchObject({ taskId: 41, account: "acme", outcome: { kind: "failed" } });
  });
});
