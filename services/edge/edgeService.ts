import type { ReelayConfig } from "../../contracts/config.ts";
import type { Logger } from "../shared/log.ts";
import { watchConnection } from "../shared/connectionHealth.ts";
import type { Nats } from "../shared/nats.ts";
import { TaskLog } from "../shared/taskLog.ts";
import { taskHasTrace } from "../shared/taskTrace.ts";
import { AccountLedger } from "../billing/accountLedger.ts";
import { BalanceMirror } from "../billing/balanceMirror.ts";
import { LedgerChatUsageMeter } from "../billing/chatUsageMeter.ts";
import { ApiKeyDirectory } from "./auth.ts";
import { RateLimiter } from "./rateLimiter.ts";
import { registerChatRoutes } from "./chat/chatRoutes.ts";
import type { ChatUsageMeter } from "../billing/chatUsageMeter.ts";
import { jsonReply, writeReply } from "./http/reply.ts";
import { nativeUws, type TemplatedApp, type us_listen_socket } from "./http/uws.ts";
import { registerEventRoutes } from "./events/eventRoutes.ts";
import { TaskEventHub } from "./events/taskEventHub.ts";
import { registerVideoRoutes, videoBaseUrl } from "./video/videoRoutes.ts";
import { IdempotencyKeys } from "./video/idempotencyKeys.ts";
import { TaskSubmitter } from "./video/taskSubmitter.ts";
import { TaskViewReader } from "./video/taskViewReader.ts";
import { VideoFiles } from "./video/videoFiles.ts";

export interface EdgeOptions {
  host: string;
  port: number;
  publicUrl: string | undefined;
  /** Chat billing; the ledger by default (tests pass a recording meter). */
  chatUsageMeter?: ChatUsageMeter;
}

/** The HTTP edge: authenticates, validates and answers; all state lives in NATS. */
export class EdgeService {
  private listenSocket: us_listen_socket | undefined;
  private uws: ReturnType<typeof nativeUws> | undefined;
  private readonly keys: ApiKeyDirectory;
  private readonly views: TaskViewReader;
  private readonly submitter: TaskSubmitter;
  private readonly ledger: AccountLedger;
  private readonly balances: BalanceMirror;
  private readonly connection: { connected(): boolean };
  private readonly taskLog: TaskLog;
  private readonly hub: TaskEventHub;

  constructor(private readonly nats: Nats, private readonly config: ReelayConfig, private readonly log: Logger, private readonly options: EdgeOptions) {
    const { requestsPerSecondPerKey, burstPerKey } = config.limits;
    this.keys = new ApiKeyDirectory(nats.apiKeys, log, new RateLimiter(requestsPerSecondPerKey, burstPerKey));
    this.taskLog = new TaskLog(nats.js, nats.jsm);
    this.views = new TaskViewReader(nats.taskViews, this.taskLog, log);
    this.hub = new TaskEventHub(nats.js, this.taskLog, log.child({ part: "event streams" }));
    this.submitter = new TaskSubmitter(nats.nc, nats.js, config.limits.submitWaitMs, log);
    this.ledger = new AccountLedger(nats);
    this.balances = new BalanceMirror(nats.balances, log);
    this.connection = watchConnection(nats.nc, log);
  }

  /** Starts listening; resolves to the bound port (useful with port 0). */
  async start(): Promise<number> {
    const uWS = nativeUws(this.log);
    this.uws = uWS;
    await this.keys.start();
    await this.views.start();
    await this.balances.start();
    await this.hub.start();
    this.submitter.start();
    const app = uWS.App();
    this.registerRoutes(app);
    return new Promise((resolve, reject) => {
      app.listen(this.options.host, this.options.port, (socket) => {
        if (!socket) return reject(new Error(`cannot listen on ${this.options.host}:${this.options.port} (port in use?)`));
        this.listenSocket = socket;
        resolve(uWS.us_socket_local_port(socket));
      });
    });
  }

  async stop(): Promise<void> {
    if (this.listenSocket) this.uws?.us_listen_socket_close(this.listenSocket);
    this.listenSocket = undefined;
    this.submitter.stop();
    this.hub.stop();
    this.views.stop();
    this.balances.stop();
    this.keys.stop();
  }

  /** What keeps this edge from answering correctly: no NATS, or an in-memory mirror without its watch. */
  private healthProblems(natsConnected: boolean): string[] {
    const problems = natsConnected ? [] : ["no NATS connection"];
    for (const mirror of [this.keys.mirror, this.views.mirror, this.balances.mirror]) {
      if (!mirror.healthy) problems.push(`${mirror.name} mirror is not watching`);
    }
    return problems;
  }

  private registerRoutes(app: TemplatedApp): void {
    registerVideoRoutes(app, {
      config: this.config,
      keys: this.keys,
      create: {
        js: this.nats.js,
        ledger: this.ledger,
        idempotency: new IdempotencyKeys(this.nats.js, this.nats.idempotency),
        submitter: this.submitter,
        views: this.views,
        connection: this.connection,
        taskExists: (taskId) => taskHasTrace(this.nats.jsm, taskId),
        claimTimeoutMs: this.config.limits.idempotencyClaimTimeoutMs,
        log: this.log,
      },
      views: this.views,
      publicUrl: this.options.publicUrl,
      log: this.log,
    });
    registerChatRoutes(app, {
      config: this.config,
      keys: this.keys,
      meter: this.options.chatUsageMeter ?? new LedgerChatUsageMeter(this.ledger, this.balances),
      connection: this.connection,
      log: this.log,
    });
    registerEventRoutes(app, {
      keys: this.keys,
      views: this.views,
      hub: this.hub,
      taskLog: this.taskLog,
      js: this.nats.js,
      baseUrl: videoBaseUrl(this.options.publicUrl),
      log: this.log,
      keepaliveMs: this.config.limits.sseKeepaliveMs,
    });
    new VideoFiles(this.nats.videos).register(app, this.log);
    app.get("/healthz", (res) => {
      const problems = this.healthProblems(this.connection.connected());
      writeReply(res, jsonReply(problems.length === 0 ? 200 : 503, { status: problems.length === 0 ? "ok" : problems.join("; ") }));
    });
    app.any("/*", (res, req) => {
      const what = `${req.getMethod().toUpperCase()} ${req.getUrl()}`;
      writeReply(res, jsonReply(404, { code: 404, msg: `no such endpoint: ${what}` }));
    });
  }
}
