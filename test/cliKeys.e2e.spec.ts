import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runningEmbeddedServer } from "../infra/natsServer.ts";
import { reelayInProcess } from "./helpers/cliInProcess.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

const run = promisify(execFile);
const CLI = new URL("../scripts/reelay.mjs", import.meta.url).pathname;
const reelay = (args: string[], env: Record<string, string>) =>
  run(process.execPath, [CLI, ...args], { env: { ...process.env, ...env } });

describe("reelay keys", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => app?.stop());

  it("creates a key printed alone on the last line, lists it, and revokes it (then 401)", async () => {
    const env = { NATS_URL: app.natsUrl };
    const created = await reelay(["keys", "create", "--account", "cli-acct"], env);
    const key = created.stdout.trim().split("\n").at(-1) ?? "";
    expect(key).toMatch(/^rly_[A-Za-z0-9_-]+$/);
    const client = new VideoClient(app.baseUrl, key);
    expect((await client.query(1)).status).not.toBe(401);

    const listed = await reelayInProcess(app, "keys", "list", "--account", "cli-acct");
    const [keyId] = listed.stdout.trim().split("\t");
    expect(listed.stdout).not.toContain(key);
    expect(keyId).toMatch(/^[0-9a-f]{12}$/);

    await reelayInProcess(app, "keys", "revoke", String(keyId));
    await expect.poll(async () => (await client.query(1)).status, { timeout: 5000 }).toBe(401);
    expect((await reelayInProcess(app, "keys", "list", "--account", "cli-acct")).stdout).toBe("no keys\n");
  });

  it("stores only hashes: the key text appears nowhere in the bucket", async () => {
    const created = await reelayInProcess(app, "keys", "create", "--account", "hash-check");
    const key = created.stdout.trim().split("\n").at(-1) ?? "";
    for await (const name of await app.nats.apiKeys.keys()) {
      expect(name).not.toContain(key);
      expect((await app.nats.apiKeys.get(name))?.string()).not.toContain(key);
    }
  });

  it("refuses bad input with a message and a non-zero exit, never a stack trace", async () => {
    const failure = await reelay(["keys", "create"], { NATS_URL: app.natsUrl }).catch((error: { code: number; stderr: string }) => error);
    expect(failure).toMatchObject({ code: 1 });
    expect((failure as { stderr: string }).stderr).toMatch(/^reelay: keys create needs --account <name>\n/);
    expect((failure as { stderr: string }).stderr).not.toMatch(/\n\s+at /);
    const noKeyId = await reelayInProcess(app, "keys", "revoke");
    expect(noKeyId).toMatchObject({ code: 1, stdout: "" });
    expect(noKeyId.stderr).toMatch(/^reelay: keys revoke needs a key id\nusage: /);
    const badName = await reelayInProcess(app, "keys", "create", "--account", "no spaces");
    expect(badName.code).toBe(1);
    expect(badName.stderr).toMatch(/account names/);
    expect(badName.stderr).not.toMatch(/\n\s+at /);
  });

  it("without NATS_URL, starts the data dir's embedded server for the command and stops it after", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "reelay-cli-data-"));
    try {
      const created = await reelay(["keys", "create", "--account", "offline"], { REELAY_DATA_DIR: dataDir, NATS_URL: "" });
      expect(created.stdout.trim().split("\n").at(-1)).toMatch(/^rly_/);
      const listed = await reelay(["keys", "list"], { REELAY_DATA_DIR: dataDir, NATS_URL: "" });
      expect(listed.stdout).toContain("offline");
      expect(await runningEmbeddedServer(dataDir)).toBeUndefined();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
