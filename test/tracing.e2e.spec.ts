import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { ApiKeyStore } from "../services/shared/apiKeys.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { killHard, startChildService, writeConfigFile, type ServiceChild } from "./helpers/childService.ts";
import { addInstantUpstream } from "./helpers/instantUpstream.ts";
import { startOtlpReceiver } from "./helpers/otlpReceiver.ts";
import { testConfig } from "./helpers/testApp.ts";
import { startTestNats } from "./helpers/testNats.ts";
import { VideoClient } from "./helpers/videoClient.ts";

/** `reelay serve` exporting to an OTLP receiver: one trace from the client's request to the settlement. */
describe("traces across NATS", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
  let nats: Nats;
  let child: ServiceChild;
  let client: VideoClient;
  let stopUpstream: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    [server, receiver] = await Promise.all([startTestNats(), startOtlpReceiver()]);
    const config = testConfig();
    // An instant upstream instead of a render: this file is about traces.
    const instant = await addInstantUpstream(config);
    stopUpstream = () => instant.upstream.stop();
    nats = await connectNats(server.url, "tracing-test", { replicas: 1, leaseMs: config.runner.leaseMs });
    child = await startChildService([], {
      NATS_URL: server.url,
      REELAY_CONFIG: writeConfigFile(config),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: "100",
      ...instant.env,
    });
    const ledger = new AccountLedger(nats);
    await ledger.execute("traced", { type: "open" });
    await ledger.execute("traced", { type: "credit", amountMicros: 100_000_000, creditId: "tracing-test" });
    client = new VideoClient(`http://127.0.0.1:${child.port}`, (await new ApiKeyStore(nats.apiKeys).create("traced")).key);
  });
  afterAll(async () => {
    if (child) await killHard(child);
    await nats?.nc.drain();
    await Promise.all([server?.stop(), receiver?.stop(), stopUpstream?.()]);
  });

  it("continues the client's traceparent through the edge, the runner's task and upstream calls, and the settlement", async () => {
    const traceId = randomBytes(16).toString("hex");
    const clientSpan = randomBytes(8).toString("hex");
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 }, { traceparent: `00-${traceId}-${clientSpan}-01` });
    expect((await client.waitForFinal(created.body.data?.task_id as number, 30_000)).body.data?.status).toBe("success");

    const wanted = ["POST /api/compat/videosGenerations", "video task", "provider submit", "settle video task"];
    const ofTrace = () => receiver.spans.filter((span) => span.traceId === traceId);
    for (let i = 0; i < 100 && !wanted.every((name) => ofTrace().some((span) => span.name === name)); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const spans = ofTrace();
    const named = (name: string) => spans.find((span) => span.name === name);
    expect(spans.map((span) => span.name)).toEqual(expect.arrayContaining(wanted));
    // Parent links: client → edge → task (over the WORK message) → upstream call and settlement (over the final task event's headers).
    expect(named("POST /api/compat/videosGenerations")?.parentSpanId).toBe(clientSpan);
    expect(named("video task")?.parentSpanId).toBe(named("POST /api/compat/videosGenerations")?.spanId);
    expect(named("provider submit")?.parentSpanId).toBe(named("video task")?.spanId);
    expect(named("settle video task")?.parentSpanId).toBe(named("video task")?.spanId);
    expect(named("POST /api/compat/videosGenerations")?.thread).toBe("main");
    expect(named("video task")?.thread).toBe("runner");
  });
});
