import { randomUUID } from "node:crypto";
import { pino } from "pino";
import { AccountLedger } from "../../services/billing/accountLedger.ts";
import type { ReelayConfig } from "../../contracts/config.ts";
import { loadConfig } from "../../services/shared/config.ts";
import { storeLimitsOf } from "../../infra/jetstreamLayout.ts";
import { ApiKeyStore } from "../../services/shared/apiKeys.ts";
import { connectNats, type Nats } from "../../services/shared/nats.ts";
import { startEdge } from "../../services/edge/main.ts";
import { startProjector } from "../../services/projector/main.ts";
import { startRunner, type ProviderFactory } from "../../services/runner/main.ts";
import type { ChatUsageMeter } from "../../services/billing/chatUsageMeter.ts";
import { startTestNats } from "./testNats.ts";

export type ConfigTweak = (config: ReelayConfig) => void;

/** The shipped config made quick for tests: short queue delay and polling, short runner lease. */
export function testConfig(tweak?: ConfigTweak): ReelayConfig {
  const config = loadConfig();
  for (const provider of Object.values(config.providers)) {
    if (provider.kind === "local") {
      provider.queueDelayMs = 100;
      // Half the CPU of the shipped veryfast: the suite renders about 50 clips (localRender covers both).
      provider.encoderPreset = "ultrafast";
    }
    provider.pollEveryMs = 50;
    provider.pollMaxEveryMs = 50;
    // Tests serve reference images from loopback (vendors that fetch references themselves need nothing).
    if ("allowPrivateReferenceUrls" in provider) provider.allowPrivateReferenceUrls = true;
  }
  config.runner.leaseMs = 2000;
  config.runner.allowPrivateResultUrls = true;
  config.limits.submitWaitMs = 5000;
  tweak?.(config);
  return config;
}

export interface TestApp {
  baseUrl: string;
  natsUrl: string;
  nats: Nats;
  config: ReelayConfig;
  ledger: AccountLedger;
  /** The admin API's base (`http://127.0.0.1:<port>/admin/v1`), when started with `admin: true`. */
  adminUrl: string;
  /** A fresh API key for the account, which is opened and credited (default 10,000 yuan) on the spot. */
  keyFor(account: string, creditYuan?: number): Promise<string>;
  stop(): Promise<void>;
}

export const silentLog = pino({ level: process.env.TEST_LOG_LEVEL ?? "silent" });

/**
 * The whole service in this process against its own nats-server, as `npm start` wires it.
 * `services` picks which services run here (e.g. no runner, when a test runs runners as child processes).
 */
export async function startTestApp(
  options: {
    tweak?: ConfigTweak;
    services?: Array<"edge" | "runner" | "projector">;
    chatUsageMeter?: ChatUsageMeter;
    /** Serves provider names with test providers (e.g. a ScriptedVendor) instead of their config kind. */
    providers?: ProviderFactory;
    /** REELAY_TRUSTED_PROXIES of the edge. */
    trustedProxies?: string[];
    /** Also start the admin API's listener (loopback, any free port). */
    admin?: boolean;
  } = {},
): Promise<TestApp> {
  const services = options.services ?? ["edge", "runner", "projector"];
  const server = await startTestNats();
  const config = testConfig(options.tweak);
  const nats = await connectNats(server.url, "reelay-test", { replicas: 1, leaseMs: config.runner.leaseMs, ...storeLimitsOf(config) });
  const stops: Array<() => Promise<void>> = [];
  if (services.includes("projector")) stops.push((await startProjector(nats, config, silentLog)).stop);
  if (services.includes("runner")) stops.push((await startRunner(nats, config, silentLog, options.providers)).stop);
  let port = 0;
  let adminPort: number | undefined;
  if (services.includes("edge")) {
    const edge = await startEdge(nats, config, silentLog, {
      host: "127.0.0.1",
      port: 0,
      publicUrl: undefined,
      ...(options.trustedProxies ? { trustedProxies: options.trustedProxies } : {}),
      ...(options.chatUsageMeter ? { chatUsageMeter: options.chatUsageMeter } : {}),
      ...(options.admin ? { admin: { host: "127.0.0.1", port: 0 } } : {}),
    });
    port = edge.port;
    adminPort = edge.adminPort;
    stops.unshift(edge.stop);
  }
  const keys = new ApiKeyStore(nats.apiKeys);
  const ledger = new AccountLedger(nats);
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    natsUrl: server.url,
    nats,
    config,
    ledger,
    adminUrl: adminPort === undefined ? "" : `http://127.0.0.1:${adminPort}/admin/v1`,
    keyFor: async (account, creditYuan = 10_000) => {
      await ledger.execute(account, { type: "open" });
      if (creditYuan > 0) {
        await ledger.execute(account, { type: "credit", amountMicros: creditYuan * 1_000_000, creditId: `test-${randomUUID()}` });
      }
      return (await keys.create(account)).key;
    },
    stop: async () => {
      for (const stop of stops) await stop();
      await nats.nc.drain();
      await server.stop();
    },
  };
}
