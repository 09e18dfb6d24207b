import { connect } from "@nats-io/transport-node";
import { describe, expect, it } from "vitest";
import { drainWithin } from "../services/cli/natsContext.ts";
import { startTestNats } from "./helpers/testNats.ts";

describe("drainWithin: a connection is closed at the end, whatever the server does", () => {
  it("given the server gone (the drain fails at once), then the connection is closed, not left reconnecting", async () => {
    const server = await startTestNats();
    const nc = await connect({ servers: server.url, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
    const disconnected = (async () => {
      for await (const status of nc.status()) if (status.type === "disconnect") return;
    })();
    await server.stop();
    await disconnected;

    await drainWithin(nc, 2000);
    expect(nc.isClosed()).toBe(true);
  });

  it("given the server up, then it drains and closes", async () => {
    const server = await startTestNats();
    try {
      const nc = await connect({ servers: server.url });
      await drainWithin(nc, 2000);
      expect(nc.isClosed()).toBe(true);
    } finally {
      await server.stop();
    }
  });
});
