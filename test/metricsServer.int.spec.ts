import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { failureLine } from "../services/cli/natsCommands.ts";
import { ConfigError } from "../services/shared/config.ts";
import { startMetricsServer } from "../services/shared/metrics/metricsServer.ts";
import { silentLog } from "./helpers/testApp.ts";

describe("the metrics listener (REELAY_METRICS_PORT)", () => {
  it("given its port taken, when it starts, then start-up stops with one line naming the setting, not a stack trace", async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, "127.0.0.1", resolve));
    const address = holder.address();
    const port = typeof address === "object" && address ? address.port : 0;
    try {
      const failure = await startMetricsServer("127.0.0.1", port, silentLog).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(ConfigError);
      expect(failureLine(failure)).toBe(`reelay: port ${port} on 127.0.0.1 is already in use (another reelay, or another program, listens there): stop it or set REELAY_METRICS_PORT to a free port`);
    } finally {
      holder.close();
    }
  });

  it("given port 0, when it starts, then it serves /metrics on the free port it names", async () => {
    const metrics = await startMetricsServer("127.0.0.1", 0, silentLog);
    try {
      expect(metrics.port).toBeGreaterThan(0);
      expect((await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).status).toBe(200);
    } finally {
      await metrics.stop();
    }
  });
});
