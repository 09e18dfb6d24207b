import { accessSync, constants, mkdirSync } from "node:fs";
import { resolve } from "node:path";
import type { ReelayConfig } from "../../contracts/config.ts";
import { storeLimitsOf, type LayoutOptions } from "../../infra/jetstreamLayout.ts";
import { embeddedNats } from "../../infra/natsServer.ts";
import type { NatsCredentials } from "../../infra/natsCredentials.ts";
import { UnsupportedNatsServerError } from "../../infra/natsServerVersion.ts";
import { ConfigError } from "../shared/config.ts";
import { environment } from "../shared/environment.ts";
import type { NatsConnection } from "@nats-io/transport-node";
import { connectNats, type Nats } from "../shared/nats.ts";

/**
 * Drains (flushes what is pending) but never waits forever, and always leaves the connection closed: with the
 * server gone a drain cannot finish, or fails at once, and a connection left open goes on reconnecting and
 * keeps the process alive (`reelay tasks watch` ignored Ctrl-C after its server stopped).
 */
export async function drainWithin(nc: NatsConnection, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  await Promise.race([nc.drain().catch(() => undefined), timeout]);
  clearTimeout(timer);
  if (!nc.isClosed()) await nc.close().catch(() => undefined);
}

/** The server a command needs could not be reached or set up: an operator's problem to fix, said in one line. */
export class NatsUnreachableError extends Error {}

/** NATS_URL when set and non-empty: an external server or cluster instead of the embedded one. */
export const externalNatsUrl = (): string | undefined => environment().NATS_URL;

/**
 * REELAY_DATA_DIR, made when missing. A path that cannot hold the embedded server's store stops the command with
 * one line naming the variable (it was a stack trace from deep inside the server's start).
 */
function preparedDataDir(): string {
  const dir = resolve(environment().REELAY_DATA_DIR);
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch (error) {
    throw new ConfigError(`REELAY_DATA_DIR ${JSON.stringify(dir)} cannot hold reelay's data: ${dataDirProblem(error as NodeJS.ErrnoException)}`);
  }
  return dir;
}

function dataDirProblem(error: NodeJS.ErrnoException): string {
  switch (error.code) {
    case "EEXIST":
      return "it is a file, not a folder";
    case "ENOTDIR":
      return "a part of its path is a file, not a folder";
    case "EACCES":
    case "EPERM":
      return "this process may not write there";
    case "EROFS":
      return "it is on a read-only file system";
    default:
      return error.message;
  }
}

/** The layout asked for: used to create what is missing, and by `reelay infra plan|apply` to change the rest. */
export const layoutOptions = (config: ReelayConfig): LayoutOptions => ({
  replicas: environment().REELAY_REPLICAS,
  leaseMs: config.runner.leaseMs,
  ...storeLimitsOf(config),
});

/**
 * The NATS a command works against: NATS_URL when set (an existing server or cluster), otherwise the
 * embedded server of REELAY_DATA_DIR, started for this process if it is not running yet (`ownedServer`: or
 * refused, when another process started it). Streams and buckets are created or updated on the way, so any
 * command works on an empty store.
 */
export async function openNats(
  name: string,
  config: ReelayConfig,
  say: (line: string) => void,
  { ownedServer = false }: { ownedServer?: boolean } = {},
): Promise<{ nats: Nats; url: string; credentials: NatsCredentials | undefined; close(): Promise<void> }> {
  const external = externalNatsUrl();
  const embedded = external ? undefined : await embeddedNats(preparedDataDir(), say, { owned: ownedServer });
  const url = external ?? embedded?.url ?? "";
  const layout = layoutOptions(config);
  // An operator's NATS_URL is used as given; the embedded server needs the credentials of its data dir.
  const credentials = embedded?.credentials;
  const nats = await connectNats(url, name, layout, credentials).catch(async (error: unknown) => {
    await embedded?.stop();
    if (error instanceof UnsupportedNatsServerError) throw error;
    throw new NatsUnreachableError(`cannot connect to NATS at ${url}: ${(error as Error).message}`, { cause: error });
  });
  return {
    nats,
    url,
    credentials,
    close: async () => {
      await drainWithin(nats.nc, 5000);
      await embedded?.stop();
    },
  };
}
