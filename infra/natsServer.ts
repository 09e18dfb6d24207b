import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { availableParallelism } from "node:os";
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { locateNatsServer, type NatsServerBinary } from "./natsServerBinary.ts";
import { PACKAGE_ROOT } from "./packageRoot.ts";
import { withPidLock } from "./pidLock.mjs";
import { authorizationBlock, embeddedCredentials, type NatsCredentials } from "./natsCredentials.ts";

const SINGLE_NODE_CONFIG = join(PACKAGE_ROOT, "infra", "nats", "single.conf");

export interface RunningNatsServer {
  url: string;
  pid: number;
  /** Its HTTP monitor's port (`/healthz`, `/varz`). */
  monitorPort: number;
  /** The version the binary reported, e.g. "2.15.1". */
  version: string;
  stop(): Promise<void>;
  /** Sends `signal` to the server without letting it clean up (crash tests: SIGKILL). */
  kill(signal: NodeJS.Signals): Promise<void>;
}

/** Listens on `port` (0: any) on loopback and closes again; the port it got, or undefined when taken. */
function probePort(port: number): Promise<number | undefined> {
  return new Promise((resolvePort) => {
    const probe = createServer();
    probe.once("error", () => resolvePort(undefined));
    probe.listen(port, "127.0.0.1", () => {
      const address = probe.address();
      const bound = typeof address === "object" && address ? address.port : undefined;
      probe.close(() => resolvePort(bound));
    });
  });
}

/**
 * A free loopback port whose successor is free too (nats-server's monitor takes port + 1). The kernel
 * hands out neighbouring ports to outgoing connections, so on a busy machine port + 1 is often taken.
 */
export async function freeLoopbackPort(): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    const port = await probePort(0);
    if (port === undefined) throw new Error("cannot bind any loopback port");
    if (port < 65535 && ((await probePort(port + 1)) !== undefined || attempt >= 20)) return port;
  }
}

/** The part of nats-server's `/varz` that names a server's store (it keeps JetStream in `<store_dir given>/jetstream`). */
const ServerVarz = z.object({ jetstream: z.object({ config: z.object({ store_dir: z.string() }) }) });

/**
 * The JetStream store of the server whose monitor is on `monitorPort` ("refused": no nats-server there;
 * "silent": no answer within `timeoutMs`). Another server may hold the port a server was started on (two
 * starts that probed the same free port: only one binds it, the other exits), and its monitor answers
 * healthy just the same.
 */
async function storeAt(monitorPort: number, timeoutMs: number): Promise<string | "refused" | "silent"> {
  try {
    const varz = await fetch(`http://127.0.0.1:${monitorPort}/varz`, { signal: AbortSignal.timeout(timeoutMs) });
    const answered = ServerVarz.safeParse(await varz.json());
    return answered.success ? answered.data.jetstream.config.store_dir : "refused";
  } catch (error) {
    return error instanceof DOMException && error.name === "TimeoutError" ? "silent" : "refused";
  }
}

/** Where a server given `storeDir` (`-sd`) keeps JetStream, as its `/varz` says. */
const jetStreamDirOf = (storeDir: string): string => join(resolve(storeDir), "jetstream");

async function waitUntilReady(child: ChildProcess, monitorPort: number, storeDir: string, logFile: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      const tail = (() => {
        try {
          return readFileSync(logFile, "utf8").trim().split("\n").slice(-3).join("\n  ");
        } catch {
          return "(no log)";
        }
      })();
      throw new Error(`nats-server exited with code ${child.exitCode}; last lines of ${logFile}:\n  ${tail}`);
    }
    const monitor = await fetch(`http://127.0.0.1:${monitorPort}/healthz?js-enabled-only=true`).catch(() => undefined);
    // Healthy but another store's (that server holds our port): wait on, until our server exits for want of it.
    if (monitor?.ok && (await storeAt(monitorPort, 5_000)) === jetStreamDirOf(storeDir)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nats-server did not become ready within 15 s; see ${logFile}`);
}

let located: NatsServerBinary | undefined;

/** The server binary, looked for (and fetched if need be) once per process. */
function natsServerBinary(say: (line: string) => void): NatsServerBinary {
  located ??= locateNatsServer({ say });
  return located;
}

/** Starts nats-server with JetStream on loopback, its store in `storeDir`. */
export async function startNatsServer(options: {
  storeDir: string;
  say: (line: string) => void;
  /** A fixed port (e.g. to restart a server where its clients expect it); a free one by default. */
  port?: number;
  /** Required of every client; none: any client may connect (tests' servers). */
  credentials?: NatsCredentials;
}): Promise<RunningNatsServer> {
  const binary = natsServerBinary(options.say);
  mkdirSync(options.storeDir, { recursive: true });
  const logFile = join(options.storeDir, "..", "nats-server.log");
  const configFile = options.credentials ? serverConfigWith(options.credentials, join(options.storeDir, "..")) : SINGLE_NODE_CONFIG;
  // The monitor port is port + 1 (it answers /healthz once JetStream is up). Either may be taken between
  // our probe and the server's bind; then the server exits and we try other ports. A server restarted on its
  // fixed port keeps that port and tries another monitor port (an outgoing connection may hold port + 1 now).
  for (let attempt = 1; ; attempt++) {
    let port = options.port ?? (await freeLoopbackPort());
    while (port >= 65534) port = await freeLoopbackPort();
    const monitorPort = options.port !== undefined && attempt > 1 ? ((await probePort(0)) ?? port + 1) : port + 1;
    const child = spawnWatched(binary.path, configFile, port, monitorPort, options.storeDir, logFile);
    try {
      await waitUntilReady(child, monitorPort, options.storeDir, logFile);
      return running(child, port, monitorPort, binary.version);
    } catch (error) {
      if (attempt >= 5 || child.exitCode === null) throw error;
    }
  }
}

/**
 * A small shell keeps the server tied to this process: it stops the server (cleanly, SIGTERM) when our
 * end of its stdin closes — on stop(), and also when this process dies without cleaning up (kill -9) —
 * and exits when the server does, so a server that could not start is seen at once. The reader gets
 * stdin through fd 3: a background job's own stdin is /dev/null.
 */
const WATCHDOG = 'server="$1"; shift; exec 3<&0; "$server" "$@" & pid=$!; { read -r _ <&3; kill -TERM "$pid" 2>/dev/null; } & wait "$pid"';

/**
 * single.conf with an authorization block, written owner-only beside the store: credentials on the command
 * line would be readable by every local user (ps, /proc/<pid>/cmdline).
 */
function serverConfigWith(credentials: NatsCredentials, dir: string): string {
  const path = join(dir, "nats-server.conf");
  writeFileSync(path, readFileSync(SINGLE_NODE_CONFIG, "utf8") + authorizationBlock(credentials), { mode: 0o600 });
  chmodSync(path, 0o600);
  return path;
}

function spawnWatched(bin: string, configFile: string, port: number, monitorPort: number, storeDir: string, logFile: string): ChildProcess {
  const out = openSync(logFile, "a");
  const args = ["-c", configFile, "-a", "127.0.0.1", "-p", String(port), "-m", String(monitorPort), "-sd", resolve(storeDir)];
  // Its own process group: Ctrl-C in a terminal signals the whole foreground group, and the server must
  // outlive reelay's own shutdown (which still needs it to drain), not race it.
  try {
    return spawn("sh", ["-c", WATCHDOG, "sh", bin, ...args], { stdio: ["pipe", out, out], detached: true, env: { ...process.env, GOMAXPROCS: serverProcs(process.env) } });
  } finally {
    // The child has its own copy of the log's descriptor; this process's stayed open, one per start attempt.
    closeSync(out);
  }
}

/**
 * How many cores the Go runtime of a server reelay starts may run on at once: the operator's GOMAXPROCS, else
 * half of the cores this process may use (at least one). Such a server shares its machine with reelay's
 * process (three busy threads), and Go's default takes every core: on 2 cores, GOMAXPROCS=1 cut nats-server's
 * CPU per instant task by a fifth, most of it time in the kernel (docs/benchmarks.md, 2026-11-27).
 */
export function serverProcs(env: NodeJS.ProcessEnv): string {
  const given = env.GOMAXPROCS?.trim();
  if (given) return given;
  return String(Math.max(1, Math.floor(availableParallelism() / 2)));
}

function running(child: ChildProcess, port: number, monitorPort: number, version: string): RunningNatsServer {
  const pid = child.pid ?? 0;
  return {
    url: `nats://127.0.0.1:${port}`,
    pid,
    monitorPort,
    version,
    stop: () =>
      new Promise<void>((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done();
        child.once("exit", () => done());
        child.stdin?.end();
      }),
    kill: (signal) =>
      new Promise<void>((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done();
        child.once("exit", () => done());
        // The watchdog shell leads its own process group: the server is in it, so both get the signal.
        process.kill(-pid, signal);
      }),
  };
}

/** What `reelay serve` writes beside its embedded server's store, for other commands to find it (no monitorPort: an earlier version's). */
const EmbeddedServerRecord = z.object({ pid: z.number().int(), url: z.string(), monitorPort: z.number().int().optional() });
type EmbeddedServerRecord = z.infer<typeof EmbeddedServerRecord>;

/** How long a recorded server's monitor may take to say which store it keeps. */
const RECORD_CHECK_MS = 2_000;

const recordPath = (dataDir: string) => join(dataDir, "nats-server.json");

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * The embedded server of a data dir if it is running now (started by `npm start` or another command). A live
 * pid is not enough: the record outlives a reelay killed with -9, and its pid may be another process's by now
 * (pids are reused). The record stands unless nothing answers at the monitor it names, or a server for
 * another store does; a server that does not answer in time may be ours, stalled, and no second server may
 * open its store.
 */
export async function runningEmbeddedServer(dataDir: string): Promise<EmbeddedServerRecord | undefined> {
  const record = readRecord(dataDir);
  if (!record || !isAlive(record.pid)) return undefined;
  // Records written before the monitor port was: the launcher's first choice, the client port + 1.
  const store = await storeAt(record.monitorPort ?? Number(new URL(record.url).port) + 1, RECORD_CHECK_MS);
  return store === "silent" || store === jetStreamDirOf(embeddedStoreDir(dataDir)) ? record : undefined;
}

function readRecord(dataDir: string): EmbeddedServerRecord | undefined {
  const path = recordPath(dataDir);
  if (!existsSync(path)) return undefined;
  try {
    return EmbeddedServerRecord.parse(JSON.parse(readFileSync(path, "utf8")));
  } catch {
    return undefined;
  }
}

const embeddedStoreDir = (dataDir: string): string => join(dataDir, "nats");

/** A process that must own its embedded server found one another process started (and will stop when it stops). */
export class EmbeddedServerTakenError extends Error {}

/**
 * The NATS that a data dir belongs to: the one already running for it, or a new one started now
 * (and stopped by `stop`). One store directory must never be opened by two servers at once. `owned`: a
 * long-lived process (`reelay serve`) refuses a server another process started, which stops with that process
 * and would leave this one without NATS for good (a CLI command uses it for its moment).
 */
export async function embeddedNats(
  dataDir: string,
  say: (line: string) => void,
  { owned = false }: { owned?: boolean } = {},
): Promise<{ url: string; credentials: NatsCredentials; stop(): Promise<void> }> {
  const credentials = embeddedCredentials(dataDir);
  // Found or started under the data dir's start lock: two processes starting at the same moment each found no
  // record (it is written once the server is ready) and opened the store with a server each, and the first to
  // stop removed the other's record, so every later command started yet another server on the same store (seen
  // with two `npm start`s on a fresh clone).
  return withPidLock(startLockPath(dataDir), { staleAfterMs: START_LOCK_STALE_MS, pollMs: START_LOCK_POLL_MS }, () => joinOrStart(dataDir, say, credentials, owned));
}

async function joinOrStart(
  dataDir: string,
  say: (line: string) => void,
  credentials: NatsCredentials,
  owned: boolean,
): Promise<{ url: string; credentials: NatsCredentials; stop(): Promise<void> }> {
  const running = await runningEmbeddedServer(dataDir);
  if (running && owned) {
    throw new EmbeddedServerTakenError(
      `the embedded nats-server of ${dataDir} is already running for another reelay process (another \`reelay serve\`, or a command such as \`reelay tasks watch\`), ` +
        "and stops when that process stops: stop it first, or run several reelay processes against a nats-server of your own (NATS_URL; see docs/operations.md)",
    );
  }
  if (running) return { url: running.url, credentials, stop: async () => {} };
  const server = await startNatsServer({ storeDir: embeddedStoreDir(dataDir), say, credentials });
  say(`embedded nats-server ${server.version} started at ${server.url}, store ${embeddedStoreDir(dataDir)}`);
  const record: EmbeddedServerRecord = { pid: server.pid, url: server.url, monitorPort: server.monitorPort };
  writeFileSync(recordPath(dataDir), JSON.stringify(record));
  return {
    url: server.url,
    credentials,
    stop: async () => {
      await server.stop();
      // Only our own record: one that names another server is that server's way to be found.
      if (readRecord(dataDir)?.pid === server.pid) rmSync(recordPath(dataDir), { force: true });
    },
  };
}

const startLockPath = (dataDir: string) => join(dataDir, "nats-server.lock");
/** A start takes well under this; a lock older than it was left by a process that died while starting. */
const START_LOCK_STALE_MS = 60_000;
const START_LOCK_POLL_MS = 50;

