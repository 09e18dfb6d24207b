import type { NatsConnection } from "@nats-io/transport-node";
import { isAtLeast, MINIMUM_NATS_SERVER, parseServerVersion, UnsupportedNatsServerError } from "../../infra/natsServerVersion.ts";

/** The message size reelay's servers take (infra/nats/*.conf: max_payload 8MB): a create's largest first event fits it. */
export const REQUIRED_MAX_PAYLOAD = 8 * 1024 * 1024;

/**
 * Refuses a server reelay must not write to, before anything is written: one older than 2.12 would
 * silently ignore guarded writes and TTLs, one that takes smaller messages than reelay writes would refuse
 * creates with inline images (as 500s), and one without JetStream has nowhere to keep the logs.
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
  if (info?.max_payload !== undefined && info.max_payload < REQUIRED_MAX_PAYLOAD) {
    throw new UnsupportedNatsServerError(
      `NATS at ${url} (nats-server ${version.text}) takes messages of at most ${info.max_payload} bytes; reelay needs ${REQUIRED_MAX_PAYLOAD} ` +
        "(a task's first event carries its inline reference image, and a ledger message up to 256 settlements). " +
        "Fix: set max_payload: 8MB in the server's config (reelay's own servers have it), or unset NATS_URL to run reelay's own server.",
    );
  }
}
