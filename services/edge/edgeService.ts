import type { ReelayConfig } from "../../contracts/config.ts";
import type { Logger } from "../shared/log.ts";
import { watchConnection } from "../shared/connectionHealth.ts";
import type { Nats } from "../shared/nats.ts";
import { TaskLog } from "../shared/taskLog.ts";
import { AccountLedger } from "../billing/accountLedger.ts";
import type { ReservationCloser } from "../billing/reservationCloser.ts";
import { SETTLEMENT_LINGER_MS } from "../billing/settlement.ts";
import { BalanceMirror } from "../billing/balanceMirror.ts";
import { LedgerChatUsageMeter } from "../billing/chatUsageMeter.ts";
import { ApiKeyDirectory } from "./auth.ts";
import { FleetRateLimiter, LocalBudget } from "./rateLimiter.ts";
import { chatRoutes } from "./chat/chatRoutes.ts";
import type { ChatUsageMeter } from "../billing/chatUsageMeter.ts";
import { environment } from "../shared/environment.ts";
import { apiErrorReply } from "./http/apiErrors.ts";
import { HttpApp } from "./http/httpApp.ts";
import { mountRoutes, type TableRoute } from "./http/routeTable.ts";
import { bodyAdmission } from "./bodyAdmission.ts";
import { connectionCap } from "./connectionCap.ts";
import { openFileLimit } from "../shared/openFileLimit.ts";
import { eventRoutes } from "./events/eventRoutes.ts";
import { trustedProxies, videoBaseUrl } from "./http/videoBaseUrl.ts";
import { TaskEventHub } from "./events/taskEventHub.ts";
import { upstreamCallbackRoutes } from "./hooks/upstreamCallbacks.ts";
import { videoRoutes } from "./video/videoRoutes.ts";
import { IdempotencyIndex } from "../tasks/idempotencyIndex.ts";
import { KeyedTasks, keyedTaskSources } from "./video/keyedTasks.ts";
import type { CreateDeps } from "./video/createTask.ts";
import { TaskIdAllocator } from "./video/taskIds.ts";
import { TaskViewReader } from "./video/taskViewReader.ts";
import { DEFAULT_FILE_LOOKUPS, STORE_READS_AT_ONCE, VideoFiles } from "./video/videoFiles.ts";
import { Semaphore } from "../shared/semaphore.ts";
import { availableMicros } from "../billing/account.ts";
import { storeLimitsOf } from "../../infra/jetstreamLayout.ts";
import { ReferenceUsage } from "../shared/referenceUsage.ts";
import type { ReferenceKeeping } from "./openaiVideos/referenceImages.ts";
import { videosApiRoutes } from "./openaiVideos/videosRoutes.ts";
import { healthRoutes, metricsRoutes, withOpenApiRoute } from "./operationsRoutes.ts";
import { startAdminListener } from "./admin/adminListener.ts";

export interface EdgeOptions {
  host: string;
  port: number;
  publicUrl: string | undefined;
  /** REELAY_TRUSTED_PROXIES: whose X-Forwarded-Proto/-Host build video addresses. */
  trustedProxies?: readonly string[];
  /** Chat billing; the ledger by default (tests pass a recording meter). */
  chatUsageMeter?: ChatUsageMeter;
  /** The admin API's own listener (REELAY_ADMIN_HOST/REELAY_ADMIN_PORT); absent: none. */
  admin?: { host: string; port: number };
}

/** The HTTP edge: authenticates, validates and answers; all state lives in NATS. */
export class EdgeService {
  private app: HttpApp | undefined;
  private boundPort = 0;
  private admin: { port: number; close(): Promise<void> } | undefined;
  /** Stored videos and references kept on this edge's disk, let go when it stops. */
  private readonly fileServers: VideoFiles[] = [];
  private readonly keys: ApiKeyDirectory;
  private readonly views: TaskViewReader;
  private readonly ledger: AccountLedger;
  private readonly balances: BalanceMirror;
  private readonly connection: { connected(): boolean };
  private readonly taskLog: TaskLog;
  private readonly hub: TaskEventHub;
  private readonly chatMeter: ChatUsageMeter;

  constructor(private readonly nats: Nats, private readonly config: ReelayConfig, private readonly log: Logger, private readonly options: EdgeOptions) {
    const { requestsPerSecondPerKey, burstPerKey } = config.limits;
    this.keys = new ApiKeyDirectory(nats.apiKeys, log, new FleetRateLimiter(requestsPerSecondPerKey, burstPerKey, nats.fleet, log));
    this.taskLog = new TaskLog(nats.js, nats.jsm);
    this.views = new TaskViewReader(nats.taskViews, this.taskLog);
    this.hub = new TaskEventHub(nats, this.taskLog, log.child({ part: "event streams" }), this.views);
    // Closes lingering for company: a projector in this process settles through this ledger (reservationCloser.ts).
    this.ledger = new AccountLedger(nats, { closeLingerMs: SETTLEMENT_LINGER_MS });
    this.balances = new BalanceMirror(nats.balances, log);
    this.connection = watchConnection(nats.nc, log);
    this.chatMeter = options.chatUsageMeter ?? new LedgerChatUsageMeter(this.ledger, this.balances, config.limits.chatHoldTtlMs, log);
  }

  /** Starts listening; resolves to the bound port (useful with port 0). */
  async start(): Promise<number> {
    await this.keys.start();
    await this.balances.start();
    await this.hub.start();
    const app = new HttpApp(this.config.cors, apiErrorReply(this.log), environment().REELAY_METRICS === "on");
    mountRoutes(app, this.routes(), this.log, bodyAdmission(this.keys, this.config.limits));
    this.app = app;
    this.boundPort = await app.listen(this.options.host, this.options.port, undefined, connectionCap(this.config.limits.maxConnections, openFileLimit(), this.log));
    if (this.options.admin) {
      const videoBaseUrl = this.options.publicUrl ?? `http://localhost:${this.boundPort}`;
      this.admin = await startAdminListener({ ...this.options.admin, nats: this.nats, ledger: this.ledger, views: this.views, taskLog: this.taskLog, videoBaseUrl, keepaliveMs: this.config.limits.sseKeepaliveMs, log: this.log.child({ part: "admin" }) });
    }
    return this.boundPort;
  }

  /** This edge's ledger, for a projector in the same process to close reservations with (one writer per account). */
  get reservationCloser(): ReservationCloser {
    return this.ledger;
  }

  /** The admin API's bound port, when it listens. */
  get adminPort(): number | undefined {
    return this.admin?.port;
  }

  async stop(): Promise<void> {
    await this.admin?.close();
    this.admin = undefined;
    await this.app?.close();
    this.app = undefined;
    for (const files of this.fileServers.splice(0)) files.close();
    // After the last answers: their charges are written before NATS goes.
    await this.chatMeter.stop?.();
    this.hub.stop();
    this.balances.stop();
    this.keys.stop();
  }

  /** What keeps this edge from answering correctly: no NATS, an in-memory mirror without its watch, a task view behind the log. */
  private healthProblems(natsConnected: boolean): string[] {
    const problems = natsConnected ? [] : ["no NATS connection"];
    for (const mirror of [this.keys.mirror, this.balances.mirror]) {
      if (!mirror.healthy) problems.push(`${mirror.name} mirror is not watching`);
    }
    const behind = this.hub.behindReason();
    if (behind) problems.push(behind);
    return problems;
  }

  /** The public API as one table (contracts/videoApi.ts, contracts/openAiApi.ts): served, and described at /openapi.json. */
  private routes(): TableRoute[] {
    const proxies = this.options.trustedProxies ?? [];
    const baseUrl = videoBaseUrl({
      publicUrl: this.options.publicUrl,
      trusted: proxies.length > 0 ? trustedProxies(proxies) : undefined,
      fallbackHost: () => `localhost:${this.boundPort}`,
    });
    const create: CreateDeps = {
      taskIds: new TaskIdAllocator(this.nats.js),
      ledger: this.ledger,
      jsm: this.nats.jsm,
      keys: new KeyedTasks(keyedTaskSources(this.nats.jsm, new IdempotencyIndex(this.nats.js, this.nats.idempotency))),
      submissions: this.hub,
      views: this.views,
      connection: this.connection,
      waitMs: this.config.limits.submitWaitMs,
      maxTaskMs: this.config.limits.maxTaskMs,
      writeMs: this.config.limits.createWriteMs,
      log: this.log,
    };
    const storeReads = new Semaphore(STORE_READS_AT_ONCE);
    const keeping = { keepBytes: this.config.videos.edgeCacheBytes, lookups: new LocalBudget(DEFAULT_FILE_LOOKUPS.perSecond, DEFAULT_FILE_LOOKUPS.burst) };
    const files = new VideoFiles(this.nats.videos, storeReads, keeping);
    const referenceFiles = new VideoFiles(this.nats.references, storeReads, keeping);
    this.fileServers.push(files, referenceFiles);
    const video = videoRoutes({
      config: this.config,
      keys: this.keys,
      create,
      views: this.views,
      jsm: this.nats.jsm,
      baseUrl,
      log: this.log,
    });
    const references: ReferenceKeeping = {
      store: this.nats.references,
      usage: new ReferenceUsage(this.nats.referenceUsage),
      quotaBytes: this.config.videos.referenceBytesPerAccount,
      lifetimeMs: storeLimitsOf(this.config).referenceLifetimeMs,
      available: async (account) => availableMicros(await this.ledger.current(account)),
    };
    const videosApi = videosApiRoutes({ config: this.config, taskLog: this.taskLog, keys: this.keys, create, views: this.views, jsm: this.nats.jsm, videos: this.nats.videos, references, files, baseUrl, log: this.log });
    const chat = chatRoutes({
      config: this.config,
      keys: this.keys,
      meter: this.chatMeter,
      connection: this.connection,
      log: this.log,
    });
    const events = eventRoutes({
      keys: this.keys,
      views: this.views,
      hub: this.hub,
      taskLog: this.taskLog,
      js: this.nats.js,
      baseUrl,
      log: this.log,
      keepaliveMs: this.config.limits.sseKeepaliveMs,
      streamsPerAccount: this.config.limits.eventStreamsPerAccount,
    });
    return withOpenApiRoute([
      ...video,
      ...videosApi,
      ...chat,
      ...events,
      ...upstreamCallbackRoutes({ config: this.config, nc: this.nats.nc, log: this.log }),
      ...files.routes("videos"),
      ...referenceFiles.routes("references"),
      ...healthRoutes(() => this.healthProblems(this.connection.connected())),
      ...metricsRoutes(this.log),
    ]);
  }
}
