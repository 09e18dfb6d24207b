import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { skipErrorsForSettledRequests } from "../services/shared/natsSettledRequests.ts";
import { startTestNats } from "./helpers/testNats.ts";

/** The client's errors module as its own code sees it (a CommonJS exports object, read at each `new`). */
const clientErrors = createRequire(import.meta.url)(
  join(dirname(createRequire(import.meta.url).resolve("@nats-io/nats-core")), "errors.js"),
) as { RequestError: new (message?: string) => Error };

/** How many RequestErrors the client constructs while `work` runs. */
async function requestErrorsMadeDuring(work: () => Promise<void>): Promise<number> {
  const original = clientErrors.RequestError;
  let made = 0;
  clientErrors.RequestError = class extends original {
    constructor(message?: string) {
      super(message);
      made++;
    }
  };
  try {
    await work();
  } finally {
    clientErrors.RequestError = original;
  }
  return made;
}

describe("requests that went well make no Error", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nc: NatsConnection;
  let applied = false;
  beforeAll(async () => {
    applied = skipErrorsForSettledRequests();
    server = await startTestNats();
    nc = await connect({ servers: server.url, noAsyncTraces: true });
    nc.subscribe("echo", { callback: (_error, msg) => void msg.respond(msg.data) });
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  it("applies to the pinned client (an upgrade that changes its internals fails here), once", () => {
    expect(applied).toBe(true);
    expect(skipErrorsForSettledRequests()).toBe(true);
  });

  it("answers requests as before, and a request without responders or past its timeout still fails with its reason", async () => {
    expect((await nc.request("echo", "hi")).string()).toBe("hi");
    await expect(nc.request("nobody.listens", "hi")).rejects.toMatchObject({ name: "RequestError", message: expect.stringMatching(/no responders/) });
    nc.subscribe("slow", { callback: () => undefined });
    await expect(nc.request("slow", "hi", { timeout: 50 })).rejects.toMatchObject({ name: "TimeoutError" });
  });

  it("a request still waiting when its connection closes is rejected with the client's reason", async () => {
    const other = await connect({ servers: server.url, noAsyncTraces: true });
    other.subscribe("never.answers", { callback: () => undefined });
    const pending = other.request("never.answers", "hi", { timeout: 10_000 });
    const outcome = pending.then(
      () => "resolved",
      (error: unknown) => `${(error as Error).name}: ${(error as Error).message}`,
    );
    await other.close();
    expect(await outcome).toBe("RequestError: connection closed");
  });

  it("makes no Error per request that went well", async () => {
    await nc.request("echo", "warm up");
    const made = await requestErrorsMadeDuring(async () => {
      for (let i = 0; i < 200; i++) await nc.request("echo", String(i));
    });
    expect(made).toBe(0);
  });
});
