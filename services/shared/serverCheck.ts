import type { NatsConnection } from "@nats-io/transport-node";
import { isAtLeast, MINIMUM_NATS_SERVER, parseServerVersion, UnsupportedNatsServerError } from "../../infra/natsServerVersion.ts";

/**
 * Refuses a server reelay must not write to, before anything is written: one older than 2.12 would
 * silently ignore guarded writes and TTLs, and one without JetStream has nowhere to keep the logs.
 * On a cluster this sees the node it connected to; every node must be upgraded (docs/operations.md, "NATS server").
 */
export function assertSupportedServer(nc: NatsConnection, url: string): void {
  const info = nc.info;
  const version = parseServerVersion(info?.version ?? "");
  if (!version || !isAtLeast(version)) {
    throw new UnsupportedNatsServerError(
      `NATS at ${url} is nats-server ${info?.version ?? "of unknown version"}; reelay needs ${MINIMUM_NATS_SERVER} or newer ` +
        "(older servers silently ignore guarded writes and TTLs reelay relies on). " +
        "Fix: upgrade every node of that server or cluster to 2.12 or newer, or unset NATS_URL to run reelay's own pinned server.",
    );
  }
  if (info?.jetstream !== true) {
    throw new UnsupportedNatsServerError(
      `NATS at ${url} (nats-server ${version.text}) has JetStream turned off; reelay keeps its logs in JetStream. ` +
        "Fix: start the server with -js (or a jetstream {} block in its config), or unset NATS_URL to run reelay's own server.",
    );
  }
}
