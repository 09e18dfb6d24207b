import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CONSUMERS, STREAMS } from "../infra/jetstreamLayout.ts";
import { AccountBalance } from "../contracts/ledger.ts";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { reelayInProcess, type CliResult } from "./helpers/cliInProcess.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

const run = promisify(execFile);
const CLI = new URL("../scripts/reelay.mjs", import.meta.url).pathname;

// VideoModel-2.0-mini, 4 s, 16:9: 1280·720·97/1024 = 87,300 tokens × 23 ¥/M = 2.007900 ¥.
const MINI_4S = "2.007900";

const STACK_FRAME = /\n\s+at /;

describe("reelay accounts and reelay audit", () => {
  let app: TestApp;
  /** In this process (test/helpers/cliInProcess.ts); `binary` runs the real `reelay` for the first command. */
  const reelay = (...args: string[]): Promise<CliResult> => reelayInProcess(app, ...args);
  const binary = async (...args: string[]): Promise<CliResult> => {
    try {
      const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env: { ...process.env, NATS_URL: app.natsUrl } });
      return { code: 0, stdout, stderr };
    } catch (error) {
      const failed = error as { code?: unknown; stdout?: string; stderr?: string };
      return { code: typeof failed.code === "number" ? failed.code : -1, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" };
    }
  };
  const balanceOf = async (account: string) => (await readAccountHistory(app.nats.js, app.nats.jsm, account)).at(-1)?.after.balanceMicros;
  /** The read models are eventually consistent: wait until the ledger projections have applied everything. */
  const projectorsCaughtUp = async () => {
    for (const durable of [CONSUMERS.taskLogReactors]) {
      await expect
        .poll(async () => {
          const info = await app.nats.jsm.consumers.info(STREAMS.events.name, durable);
          return info.num_pending + info.num_ack_pending;
        })
        .toBe(0);
    }
  };

  beforeAll(async () => {
    // The instant scripted vendor: this file is about the CLI and the ledger, not rendering.
    app = await startTestApp({ providers: () => new ScriptedVendor() });
  });
  afterAll(async () => app?.stop());

  it("audit upstream before any video task ended says there is nothing to compare (was its header alone), exit 0", async () => {
    const audited = await reelay("audit", "upstream");
    expect(audited).toMatchObject({ code: 0 });
    expect(audited.stdout).toContain("no video task has ended yet: nothing to set against the upstreams' usage\n");
  });

  it("accounts create opens an account once; again says it already exists", async () => {
    const created = await binary("accounts", "create", "cli-demo");
    expect(created).toMatchObject({ code: 0, stdout: "created account cli-demo\n" });
    const again = await reelay("accounts", "create", "cli-demo");
    expect(again).toMatchObject({ code: 0, stdout: "account cli-demo already exists\n" });
    const history = await readAccountHistory(app.nats.js, app.nats.jsm, "cli-demo");
    expect(history.map((entry) => entry.event.type)).toEqual(["AccountOpened"]);
  });

  it("accounts credit takes yuan with up to six decimals, exactly", async () => {
    const credited = await reelay("accounts", "credit", "cli-demo", "12.345678");
    expect(credited.code).toBe(0);
    expect(credited.stdout).toBe("credited 12.345678 yuan to cli-demo; balance 12.345678, available 12.345678\n");
    const history = await readAccountHistory(app.nats.js, app.nats.jsm, "cli-demo");
    expect(history.at(-1)?.event).toMatchObject({ type: "AccountCredited", data: { amountMicros: 12_345_678 } });
    expect((await reelay("accounts", "credit", "cli-demo", "0.000001")).stdout).toContain("balance 12.345679");
    expect(await balanceOf("cli-demo")).toBe(12_345_679);
  });

  it("accounts credit refuses 7 decimals, negatives and junk with a clear message, exit 1, no stack trace, nothing credited", async () => {
    const [sevenPlaces, negative, junk, tooLarge] = await Promise.all([
      reelay("accounts", "credit", "cli-demo", "1.2345678"),
      reelay("accounts", "credit", "cli-demo", "--", "-5"),
      reelay("accounts", "credit", "cli-demo", "abc"),
      reelay("accounts", "credit", "cli-demo", "999999999999"),
    ]);
    for (const refused of [sevenPlaces, negative, junk]) {
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/^reelay: amount must be yuan with up to 6 decimal places, e\.g\. 100 or 12\.345678 \(got "[^"]+"\)\n$/);
      expect(refused.stdout).toBe("");
    }
    expect(tooLarge).toMatchObject({ code: 1, stderr: "reelay: amount is too large (at most 9007199254.740991 yuan)\n" });
    expect(await balanceOf("cli-demo")).toBe(12_345_679);
  });

  // parseArgs reads a bare "-5" as an unknown option; the message says to put it after "--".
  it("accounts credit <name> -5 (without --) is refused without a stack trace", async () => {
    const refused = await reelay("accounts", "credit", "cli-demo", "-5");
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/Unknown option '-5'/);
    expect(refused.stderr).not.toMatch(STACK_FRAME);
  });

  it("an accounts command without the account's name says so, exit 1, no stack trace", async () => {
    for (const action of ["create", "credit", "limit", "show"]) {
      const refused = await reelay("accounts", action);
      expect(refused).toMatchObject({ code: 1, stdout: "" });
      expect(refused.stderr).toMatch(new RegExp(`^reelay: accounts ${action} needs an account name\\nusage: reelay accounts `));
    }
  });

  it("webhooks secret for an account that does not exist is refused, and makes no secret", async () => {
    const refused = await reelay("webhooks", "secret", "--account", "no-such-account");
    expect(refused).toMatchObject({ code: 1, stdout: "", stderr: "reelay: no account named no-such-account\n" });
    expect(await app.nats.webhookSecrets.get("no-such-account")).toBeNull();
  });

  it("an unknown infra action is the usage line, no stack trace", async () => {
    expect(await reelay("infra", "frob")).toMatchObject({ code: 1, stdout: "", stderr: "reelay: usage: reelay infra plan | infra apply\n" });
  });

  it("accounts show prints balance, reserved, available and the last entries; list shows every account", async () => {
    const shown = await reelay("accounts", "show", "cli-demo");
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/^account\s+cli-demo$/m);
    expect(shown.stdout).toMatch(/^balance\s+12\.345679 yuan$/m);
    expect(shown.stdout).toMatch(/^reserved\s+0\.000000 yuan \(0 open tasks\)$/m);
    expect(shown.stdout).toMatch(/^available\s+12\.345679 yuan$/m);
    const entries = shown.stdout.split("last entries:\n")[1]?.trimEnd().split("\n") ?? [];
    expect(entries).toHaveLength(3);
    expect(entries[0]).toMatch(/account opened\s+→ balance 0\.000000$/);
    expect(entries[1]).toMatch(/credited 12\.345678 \(reelay accounts credit\)\s+→ balance 12\.345678$/);
    expect(entries[2]).toMatch(/credited 0\.000001 \(reelay accounts credit\)\s+→ balance 12\.345679$/);

    const unknown = await reelay("accounts", "show", "nobody-here");
    expect(unknown).toMatchObject({ code: 1, stderr: "reelay: no account named nobody-here\n" });

    await app.ledger.execute("cli-other", { type: "credit", amountMicros: 1_500_000, creditId: "cli-other-1" });
    await projectorsCaughtUp();
    const listed = await reelay("accounts", "list");
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain("cli-demo\tbalance 12.345679\treserved 0.000000\tavailable 12.345679\n");
    expect(listed.stdout).toContain("cli-other\tbalance 1.500000\treserved 0.000000\tavailable 1.500000");
  });

  let taskId = 0;

  it("a task created over HTTP reserves, then settles; show and audit task list both ledger effects", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("cli-payer", 10));
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "an audited video", duration: 4 });
    expect(created.status).toBe(200);
    taskId = created.body.data?.task_id as number;
    expect(taskId).toBeGreaterThan(0);

    const shown = await reelay("accounts", "show", "cli-payer");
    expect(shown.stdout).toContain(`reserved ${MINI_4S} for task ${taskId}`);

    expect((await client.waitForFinal(taskId)).body.data?.status).toBe("success");
    await expect.poll(async () => (await app.ledger.current("cli-payer")).reservedMicros).toBe(0);

    const audited = await reelay("audit", "task", String(taskId));
    expect(audited.code).toBe(0);
    const lines = audited.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe(`task ${taskId} of account cli-payer`);
    const kinds = lines.slice(1, -1).map((line) => line.split(/\s+/)[1]);
    expect(kinds).toContain("TaskSubmitted");
    expect(kinds).toContain("GenerationSucceeded");
    expect(kinds.indexOf("TaskSubmitted")).toBeLessThan(kinds.indexOf("GenerationSucceeded"));
    expect(audited.stdout).toMatch(new RegExp(`ledger\\s+reserved ${MINI_4S} for task ${taskId}\\n`));
    expect(audited.stdout).toMatch(new RegExp(`ledger\\s+charged ${MINI_4S} for task ${taskId} \\(87300 tokens of VideoModel-2.0-mini; reservation ${MINI_4S} freed\\)`));
    expect(lines.at(-1)).toBe("now: success");
  });

  it("audit account prints the ledger with a running balance, and --json parses", async () => {
    const [text, json] = await Promise.all([reelay("audit", "account", "cli-payer"), reelay("audit", "account", "cli-payer", "--json")]);
    expect(text.code).toBe(0);
    const rows = text.stdout.trimEnd().split("\n");
    expect(rows[0]).toMatch(/^time\s+balance\s+reserved\s+entry$/);
    expect(rows.slice(1).map((row) => row.trim().split(/\s+/).slice(1, 3))).toEqual([
      ["0.000000", "0.000000"], // opened
      ["10.000000", "0.000000"], // credited
      ["10.000000", MINI_4S], // reserved
      ["7.992100", "0.000000"], // charged
    ]);
    expect(rows.at(-1)).toContain(`charged ${MINI_4S} for task ${taskId}`);

    expect(json.code).toBe(0);
    const entries = JSON.parse(json.stdout) as Array<{ sequence: number; event: { type: string }; balanceMicros: number; reservedMicros: number }>;
    expect(entries.map((entry) => [entry.event.type, entry.balanceMicros, entry.reservedMicros])).toEqual([
      ["AccountOpened", 0, 0],
      ["AccountCredited", 10_000_000, 0],
      ["CostReserved", 10_000_000, 2_007_900],
      ["ReservationSettled", 7_992_100, 0],
    ]);
    expect(entries.map((entry) => entry.sequence)).toEqual([...entries.map((entry) => entry.sequence)].sort((a, b) => a - b));

    expect(await reelay("audit", "account", "nobody-here")).toMatchObject({ code: 1, stderr: "reelay: no account named nobody-here\n" });
  });

  it("audit replay rebuilds every read model and finds no differences", async () => {
    const replayed = await reelay("audit", "replay");
    expect(replayed.stderr).toBe("");
    expect(replayed.code).toBe(0);
    expect(replayed.stdout).toMatch(/^read model\s+events\s+events\/s\s+documents\s+differences$/m);
    for (const model of ["task views", "balances"]) expect(replayed.stdout).toMatch(new RegExp(`^${model}\\s+\\d+\\s+\\d+\\s+\\d+\\s+0$`, "m"));
    expect(replayed.stdout).toMatch(/accounts [1-9]\d*, tasks [1-9]\d*, accounts with negative available balance 0, differences 0\nfinal tasks [1-9]\d*, charge problems 0\n$/);
    expect(replayed.stdout).not.toContain("DIFF");
  });

  it("audit replay exits non-zero and prints the DIFF when a live balance was tampered with", async () => {
    await projectorsCaughtUp();
    const entry = await app.nats.balances.get("cli-demo");
    const live = AccountBalance.parse(entry?.json());
    await app.nats.balances.put("cli-demo", JSON.stringify({ ...live, balanceMicros: live.balanceMicros + 1_000_000 }));

    const replayed = await reelay("audit", "replay");
    expect(replayed.code).not.toBe(0);
    expect(replayed.stdout).toMatch(/^balances\s+\d+\s+\d+\s+\d+\s+1$/m);
    expect(replayed.stdout).toMatch(/differences 1\n/);
    const diff = replayed.stdout.split("\n").find((line) => line.startsWith("DIFF "));
    expect(diff).toBeDefined();
    expect(JSON.parse(diff?.slice("DIFF ".length) ?? "null")).toMatchObject({
      projection: "balances",
      key: "cli-demo",
      live: { balanceMicros: 13_345_679 },
      replayed: { balanceMicros: 12_345_679 },
    });
    expect(replayed.stderr).not.toMatch(STACK_FRAME);
  });
});
