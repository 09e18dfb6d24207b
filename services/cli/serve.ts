import { availableParallelism } from "node:os";
import { MessageChannel, type MessagePort } from "node:worker_threads";
import type { ReelayConfig } from "../../contracts/config.ts";
import { MICROS_PER_YUAN } from "../../contracts/ledger.ts";
import { AccountLedger } from "../billing/accountLedger.ts";
import { serveCloses, type ReservationCloser } from "../billing/reservationCloser.ts";
import { formatYuan } from "../billing/pricing.ts";
import { AdminTokenStore } from "../shared/adminTokens.ts";
import { ApiKeyStore } from "../shared/apiKeys.ts";
import { environment } from "../shared/environment.ts";
import { createLogger } from "../shared/log.ts";
import { registerConsumerLagMetrics } from "../shared/metrics/consumerLag.ts";
import { startMetricsServer } from "../shared/metrics/metricsServer.ts";
import { addThreadMetrics } from "../shared/metrics/processMetrics.ts";
import { startThreadMetrics } from "../shared/metrics/threadMetrics.ts";
import { startTracing, stopTracing } from "../shared/tracing/tracing.ts";
import type { Nats } from "../shared/nats.ts";
import { externalNatsUrl, openNats } from "./natsContext.ts";
import { SERVICES, type ServiceName } from "./serviceNames.ts";
import { startServiceThread } from "./threadedService.ts";

/** Prepaid balance of the `demo` account made on first start: enough for a handful of 5 s videos. */
const DEMO_CREDIT_MICROS = 50 * MICROS_PER_YUAN;

/** First start on an empty store: an account `demo` with balance and a ready key, so the README's curl works at once. */
async function bootstrapDemoKey(nats: Nats, port: number): Promise<void> {
  for await (const _ of await nats.apiKeys.keys()) return;
  const { key } = await new ApiKeyStore(nats.apiKeys).create("demo");
  const ledger = new AccountLedger(nats);
  await ledger.execute("demo", { type: "open" });
  await ledger.execute("demo", { type: "credit", amountMicros: DEMO_CREDIT_MICROS, creditId: "demo-first-start", note: "first start" });
  process.stdout.write(
    [
      "",
      `First start: created account 'demo' with ${formatYuan(DEMO_CREDIT_MICROS)} yuan and this API key (shown once; stored only as a hash):`,
      `  ${key}`,
      "Try it:",
      `  curl -s http://localhost:${port}/api/compat/videosGenerations -H "Authorization: Bearer ${key}" \\`,
      `    -H "Content-Type: application/json" -d '{"model":"VideoModel-2.0","prompt":"a red fox running through snow"}'`,
      `  curl -s "http://localhost:${port}/api/compat/videosTask?id=<task_id>" -H "Authorization: Bearer ${key}"`,
      `Chat and videos: any OpenAI client library or gateway works with base URL http://localhost:${port}/v1 (client.chat.completions, client.videos; also served under /api/compat):`,
      `  curl -s http://localhost:${port}/v1/chat/completions -H "Authorization: Bearer ${key}" \\`,
      `    -H "Content-Type: application/json" -d '{"model":"echo","messages":[{"role":"user","content":"hello"}]}'`,
      `  curl -s http://localhost:${port}/v1/videos -H "Authorization: Bearer ${key}" -F model=VideoModel-2.0 -F prompt="a fox" -F seconds=4 -F size=1280x720`,
      "",
    ].join("\n"),
  );
}

/** A port for a projector thread's settlement to reach `closer` (the edge's ledger) through. */
function closesPortTo(closer: ReservationCloser): MessagePort {
  const { port1, port2 } = new MessageChannel();
  serveCloses(port1, closer);
  return port2;
}

/** A service thread's metrics join this process's scrapes until it stops. */
function withThreadMetrics(thread: Awaited<ReturnType<typeof startServiceThread>>): { stop(): Promise<void> } {
  const remove = addThreadMetrics(thread.metrics);
  return {
    stop: async () => {
      remove();
      await thread.stop();
    },
  };
}

/** The admin API's listener from REELAY_ADMIN_HOST/PORT: PORT + 1 by default, `off` for none. */
function adminListenerOf(env: ReturnType<typeof environment>): { admin?: { host: string; port: number } } {
  const port = env.REELAY_ADMIN_PORT;
  if (port === "off") return {};
  return { admin: { host: env.REELAY_ADMIN_HOST, port: port ?? (env.PORT === 0 || env.PORT === 65_535 ? 0 : env.PORT + 1) } };
}

/** First start without admin tokens: one named `admin`, printed once, so the admin API can be tried at once. */
async function bootstrapAdminToken(nats: Nats, adminPort: number): Promise<void> {
  const store = new AdminTokenStore(nats.adminTokens);
  if (!(await store.isEmpty())) return;
  const { token } = await store.create("admin");
  process.stdout.write(
    [
      `Console (this machine only): http://localhost:${adminPort}/console/ — sign in with this admin token (shown once; reelay admin tokens create --name <you> makes more):`,
      `  ${token}`,
      `Admin API: http://localhost:${adminPort}/admin/v1/ (OpenAPI: /admin/v1/openapi.json)`,
      `  curl -s http://localhost:${adminPort}/admin/v1/accounts -H "Authorization: Bearer ${token}"`,
      "",
    ].join("\n"),
  );
}

/**
 * `reelay serve [edge] [runner] [projector]`: the given services (all by default) in this process — the
 * edge on the main thread, the runner and the projector each on a thread of their own (when there is
 * more than one core).
 */
export async function serve(config: ReelayConfig, selected: readonly ServiceName[]): Promise<void> {
  const log = createLogger(selected.length === SERVICES.length ? "reelay" : selected.join("+"));
  // A serve owns its embedded server: one another process started would stop with that process.
  const { nats, url, credentials, close } = await openNats(`reelay-${selected.join("-")}`, config, (line) => log.info(line), { ownedServer: true });
  log.info({ nats: url, natsServer: nats.nc.info?.version }, "connected to NATS; streams and buckets ready");

  startThreadMetrics("main", { processDefaults: true });
  await startTracing("main");
  registerConsumerLagMetrics(nats.jsm);

  // The edge binds its port first: a port in use then stops start-up before a runner thread exists that
  // could take jobs and strand them for a lease when the process exits.
  // Each service's modules are loaded only where it runs: `serve projector` loads no edge, and a service
  // on a thread of its own loads there only (a child process started in half the CPU time).
  const edge = selected.includes("edge")
    ? await (await import("../edge/main.ts")).startEdge(nats, config, createLogger("edge"), {
        host: environment().HOST,
        port: environment().PORT,
        publicUrl: environment().REELAY_PUBLIC_URL,
        trustedProxies: environment().REELAY_TRUSTED_PROXIES,
        ...adminListenerOf(environment()),
      })
    : undefined;
  // Stopped in this order: edge (no new work), runner (jobs handed back), projector, the metrics listener last.
  const stops: Array<{ service: string; stop: () => Promise<void> }> = [];
  // Bound before the service threads start, as the edge's port is: a port in use stops start-up while nothing
  // holds a job yet, and "ready" means every listener answers.
  const { REELAY_METRICS_PORT: metricsPort, REELAY_METRICS_HOST: metricsHost } = environment();
  if (metricsPort !== undefined) {
    const metrics = await startMetricsServer(metricsHost, metricsPort, log);
    stops.push({ service: "metrics", stop: metrics.stop });
  }
  // Threads pay off only with cores to run them on; on one core they would just take turns.
  const threaded = availableParallelism() > 1;
  if (selected.includes("projector")) {
    // Settlement closes reservations through the edge's ledger when there is one here: one writer per account.
    const closer = edge?.reservationCloser;
    const closes = closer ? () => closesPortTo(closer) : undefined;
    const projector = threaded
      ? withThreadMetrics(await startServiceThread({ service: "projector", natsUrl: url, ...(credentials ? { natsCredentials: credentials } : {}), config }, log, closes ? { closes } : {}))
      : await (await import("../projector/main.ts")).startProjector(nats, config, createLogger("projector"), closer);
    stops.unshift({ service: "projector", stop: projector.stop });
  }
  if (selected.includes("runner")) {
    const runner = threaded
      ? withThreadMetrics(await startServiceThread({ service: "runner", natsUrl: url, ...(credentials ? { natsCredentials: credentials } : {}), config }, log))
      : await (await import("../runner/main.ts")).startRunner(nats, config, createLogger("runner"));
    stops.unshift({ service: "runner", stop: runner.stop });
  }
  if (edge) {
    stops.unshift({ service: "edge", stop: edge.stop });
    if (!externalNatsUrl()) await bootstrapDemoKey(nats, edge.port);
    if (!externalNatsUrl() && edge.adminPort !== undefined) await bootstrapAdminToken(nats, edge.adminPort);
    log.info({ url: `http://localhost:${edge.port}`, ...(edge.adminPort === undefined ? {} : { console: `http://localhost:${edge.adminPort}/console/` }) }, "reelay is ready");
  } else {
    log.info({ services: selected }, "reelay services ready");
  }


  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, "shutting down");
    for (const { service, stop } of stops) {
      await stop().catch((error: unknown) => log.error({ err: error, part: service }, "error while stopping"));
      log.info({ part: service }, "stopped");
    }
    await close();
    await stopTracing();
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void shutdown("SIGINT"));
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
}
