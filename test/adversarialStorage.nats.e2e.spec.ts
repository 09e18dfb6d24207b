import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { credentialsPath } from "../infra/natsCredentials.ts";
import { embeddedNats } from "../infra/natsServer.ts";

const run = promisify(execFile);
const CLI = new URL("../scripts/reelay.mjs", import.meta.url).pathname;

/** Issue 32: the embedded nats-server (npm start, reelay serve, the CLI without NATS_URL) is not open to every local process. */
describe("adversarial storage: the embedded nats-server", () => {
  const dataDir = mkdtempSync(join(tmpdir(), "reelay-embedded-auth-"));
  let server: Awaited<ReturnType<typeof embeddedNats>>;

  beforeAll(async () => {
    server = await embeddedNats(dataDir, () => {});
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("the embedded nats-server has no credentials: a client without them is refused, and they are made at first start, owner-only", async () => {
    await expect(connect({ servers: server.url, reconnect: false })).rejects.toThrow(/authorization/i);
    await expect(connect({ servers: server.url, reconnect: false, user: server.credentials.user, pass: "guessed" })).rejects.toThrow(/authorization/i);
    expect(statSync(credentialsPath(dataDir)).mode & 0o777).toBe(0o600);
    expect(statSync(join(dataDir, "nats-server.conf")).mode & 0o777).toBe(0o600);
    const allowed = await connect({ servers: server.url, reconnect: false, user: server.credentials.user, pass: server.credentials.password });
    await allowed.close();
  });

  it("the CLI uses the data dir's credentials with the running embedded server", async () => {
    const env = { ...process.env, REELAY_DATA_DIR: dataDir, NATS_URL: "" };
    await run(process.execPath, [CLI, "accounts", "create", "auth-demo"], { env });
    await run(process.execPath, [CLI, "accounts", "credit", "auth-demo", "2.5"], { env });
    const { stdout } = await run(process.execPath, [CLI, "accounts", "show", "auth-demo"], { env });
    expect(stdout).toMatch(/2\.5/);
  });
});
