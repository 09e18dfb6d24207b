import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RUNNER_SUBJECTS } from "../contracts/runnerControl.ts";
import { apiErrorReply } from "../services/edge/http/apiErrors.ts";
import { HttpApp } from "../services/edge/http/httpApp.ts";
import { mountRoutes } from "../services/edge/http/routeTable.ts";
import { upstreamCallbackRoutes } from "../services/edge/hooks/upstreamCallbacks.ts";
import { LocalBudget } from "../services/edge/rateLimiter.ts";
import { ProviderSettings } from "../contracts/config.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";
import { silentLog, testConfig } from "./helpers/testApp.ts";

describe("vendor callbacks anyone can post", () => {
  const suite = natsPerSuite("callback-hints-test", 2000);
  const app = new HttpApp({ allowedOrigins: [] }, apiErrorReply(silentLog));
  let base = "";

  beforeAll(async () => {
    const config = testConfig();
    config.providers["ark-hooks"] = ProviderSettings.parse({ kind: "ark", baseUrl: "https://ark.example/api/v3", apiKeyEnv: "ARK_API_KEY", publicCallbackUrl: "https://reelay.example" });
    mountRoutes(app, upstreamCallbackRoutes({ config, nc: suite.nats.nc, log: silentLog, hints: new LocalBudget(0.001, 5) }), silentLog);
    base = `http://127.0.0.1:${await app.listen("127.0.0.1", 0)}`;
  });
  afterAll(() => app.close());

  it("are relayed to the runners up to the edge's budget, then answered 200 and relayed to no one (each relayed one costs the shared nats-server 85-110 µs)", async () => {
    const runnerSide = await connect({ servers: suite.url });
    const heard: string[] = [];
    runnerSide.subscribe(RUNNER_SUBJECTS.upstreamNews, { callback: (_error, msg) => void heard.push(msg.string()) });
    await runnerSide.flush();
    const statuses = [];
    for (let i = 0; i < 30; i++) {
      const answer = await fetch(`${base}/hooks/upstream/ark-hooks`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ id: `cgt-forged-${i}`, status: "succeeded" }) });
      statuses.push(answer.status);
    }
    expect(statuses).toEqual(Array(30).fill(200));
    await runnerSide.flush();
    await expect.poll(() => heard.length).toBe(5);
    expect(heard.map((news) => (JSON.parse(news) as { providerTaskId: string }).providerTaskId)).toEqual(["cgt-forged-0", "cgt-forged-1", "cgt-forged-2", "cgt-forged-3", "cgt-forged-4"]);
    await runnerSide.close();
  });
});
