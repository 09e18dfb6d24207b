import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccountLedger } from "../services/billing/accountLedger.ts";
import { readAccountHistory } from "../services/billing/ledgerReader.ts";
import { ApiKeyStore } from "../services/shared/apiKeys.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { killHard, startChildService, writeConfigFile, type ServiceChild } from "./helpers/childService.ts";
import { addInstantUpstream } from "./helpers/instantUpstream.ts";
import { parseSamples, sampleSum } from "./helpers/promText.ts";
import { testConfig } from "./helpers/testApp.ts";
import { startTestNats } from "./helpers/testNats.ts";
import { VideoClient } from "./helpers/videoClient.ts";

const RULES_DIR = new URL("../infra/prometheus/", import.meta.url).pathname;
const DASHBOARD = new URL("../infra/grafana/reelay-dashboard.json", import.meta.url).pathname;
const hasPromtool = spawnSync("promtool", ["--version"]).status === 0;
const promtool = (args: string[], input?: string) => spawnSync("promtool", args, { cwd: RULES_DIR, input, encoding: "utf8" });

/** `reelay serve` as operators run it: the edge on the main thread, runner and projector on threads of their own. */
describe("GET /metrics of reelay serve", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nats: Nats;
  let child: ServiceChild;
  let metricsUrl: string;
  let edgeUrl: string;
  let client: VideoClient;
  let stopUpstream: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    server = await startTestNats();
    const config = testConfig();
    // An instant upstream instead of a render: this file is about metrics.
    const instant = await addInstantUpstream(config);
    stopUpstream = () => instant.upstream.stop();
    nats = await connectNats(server.url, "metrics-test", { replicas: 1, leaseMs: config.runner.leaseMs });
    // Port 0: the listener takes a free port and names it on its "metrics served" line, which comes before "ready".
    child = await startChildService([], {
      NATS_URL: server.url,
      REELAY_CONFIG: writeConfigFile(config),
      REELAY_METRICS_PORT: "0",
      ...instant.env,
    });
    const { port } = child;
    const served = /"url":"(http:\/\/127\.0\.0\.1:\d+\/metrics)"[^\n]*"metrics served"/.exec(child.startupOutput)?.[1];
    if (served === undefined) throw new Error(`no "metrics served" line before "reelay is ready":\n${child.startupOutput}`);
    metricsUrl = served;
    edgeUrl = `http://127.0.0.1:${port}`;
    const ledger = new AccountLedger(nats);
    await ledger.execute("scraped", { type: "open" });
    await ledger.execute("scraped", { type: "credit", amountMicros: 100_000_000, creditId: "metrics-test" });
    client = new VideoClient(`http://127.0.0.1:${port}`, (await new ApiKeyStore(nats.apiKeys).create("scraped")).key);
  });
  afterAll(async () => {
    if (child) await killHard(child);
    await nats?.nc.drain();
    await server?.stop();
    await stopUpstream?.();
  });

  const scrapeText = async () => {
    const response = await fetch(metricsUrl);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    return response.text();
  };

  it("merges every thread into one scrape: the edge's create and the runner's finish of one task, each thread's event loop", async () => {
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "a fox", duration: 4 });
    const taskId = created.body.data?.task_id as number;
    expect((await client.waitForFinal(taskId, 30_000)).body.data?.status).toBe("success");
    const firstScrape = await scrapeText();
    let samples = parseSamples(firstScrape);
    // The runner thread counts the finish, then the settler the charge: wait for both, not a sleep.
    const settled = () => sampleSum(samples, "reelay_video_tasks_finished_total") > 0 && sampleSum(samples, "reelay_ledger_movements_yuan_total", { kind: "settled" }) > 0;
    for (let i = 0; i < 100 && !settled(); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      samples = parseSamples(await scrapeText());
    }
    expect(sampleSum(samples, "reelay_video_tasks_created_total", { model: "VideoModel-2.0-mini" })).toBe(1);
    expect(sampleSum(samples, "reelay_video_tasks_finished_total", { provider: "instant", outcome: "success" })).toBe(1);
    expect(sampleSum(samples, "reelay_ledger_movements_yuan_total", { kind: "settled" })).toBeGreaterThan(0);
    const threads = samples.filter((s) => s.name === "reelay_thread_event_loop_delay_p99_seconds").map((s) => s.labels.thread);
    expect(threads.sort()).toEqual(["main", "projector", "runner"]);
    // Collector pauses per thread (a thread that has not collected yet has no sample, so only their shape is sure).
    expect(firstScrape).toContain("# TYPE reelay_thread_gc_pause_seconds_total counter");
    for (const pause of samples.filter((s) => s.name === "reelay_thread_gc_pause_seconds_total")) {
      expect(["main", "projector", "runner"]).toContain(pause.labels.thread);
      expect(["minor", "major", "incremental", "weakcb", "other"]).toContain(pause.labels.kind);
    }
    expect(sampleSum(samples, "reelay_process_resident_memory_bytes")).toBeGreaterThan(0);
    expect(sampleSum(samples, "reelay_runner_heartbeat_timestamp_seconds")).toBeGreaterThan(Date.now() / 1000 - 60);
  });

  it("creates and settlements of one process never race each other: its edge writes the projector's closes (no lost money write)", async () => {
    // Creates keep coming while the earlier tasks succeed and settle: with a ledger in each thread, settlements
    // and openings of the account made each other's guarded writes fail (services/billing/reservationCloser.ts).
    const ids: number[] = [];
    for (let i = 0; i < 30; i++) {
      ids.push((await client.create({ model: "VideoModel-2.0-mini", prompt: `a fox ${i}`, duration: 4 })).body.data?.task_id as number);
      await new Promise((resolve) => setTimeout(resolve, 15));
    }
    for (const taskId of ids) expect((await client.waitForFinal(taskId, 30_000)).body.data?.status).toBe("success");
    // Each settlement is written up to 100 ms after its task's end.
    const settled = async () => {
      const history = await readAccountHistory(nats.js, nats.jsm, "scraped");
      return history.filter(({ event }) => event.type === "ReservationSettled" && ids.includes(event.data.taskId)).length;
    };
    for (let i = 0; i < 100 && (await settled()) < ids.length; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await settled()).toBe(ids.length);
    expect(sampleSum(parseSamples(await scrapeText()), "reelay_ledger_lost_writes_total")).toBe(0);
  });

  it("answers GET /metrics on the edge's own port to loopback clients too", async () => {
    const onEdge = await fetch(`${edgeUrl}/metrics`);
    expect(onEdge.status).toBe(200);
    expect(await onEdge.text()).toMatch(/^# HELP reelay_/m);
  });

  it.skipIf(!hasPromtool)("passes `promtool check metrics`", async () => {
    const checked = promtool(["check", "metrics"], await scrapeText());
    expect(checked.stdout + checked.stderr).toBe("");
    expect(checked.status).toBe(0);
  });

  it.skipIf(!hasPromtool)("ships alert rules that pass `promtool check rules` and their unit tests", () => {
    const checked = promtool(["check", "rules", "reelay-alerts.yml"]);
    expect(checked.status, checked.stdout + checked.stderr).toBe(0);
    const tested = promtool(["test", "rules", "reelay-alerts.test.yml"]);
    expect(tested.status, tested.stdout + tested.stderr).toBe(0);
  });

  it("has a dashboard and alerts that use only metric families reelay exports", async () => {
    const exported = new Set([...(await scrapeText()).matchAll(/^# TYPE (\S+) (\S+)/gm)].flatMap(([, name, type]) =>
      type === "histogram" ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name as string],
    ));
    const dashboard = JSON.parse(readFileSync(DASHBOARD, "utf8")) as { panels: Array<{ targets?: Array<{ expr: string }> }> };
    const expressions = [
      ...dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr)),
      ...[...readFileSync(`${RULES_DIR}/reelay-alerts.yml`, "utf8").matchAll(/expr: (?:\|\n)?([\s\S]*?)\n\s+for:/g)].map((m) => m[1] as string),
    ];
    const used = new Set(expressions.flatMap((expr) => expr.match(/\breelay_[a-z0-9_]+/g) ?? []));
    expect(used.size).toBeGreaterThan(10);
    expect([...used].filter((name) => !exported.has(name))).toEqual([]);
  });
});
