import { locateNatsServer } from "../infra/natsServerBinary.ts";

/**
 * Finds (or fetches, once) the nats-server the whole run uses, exactly as `npm start` does, and hands it to
 * every test worker and child process through NATS_SERVER_BIN: one look-up, one download at most.
 */
export default function setup(): void {
  const server = locateNatsServer({ say: (line) => process.stderr.write(`reelay tests: ${line}\n`) });
  process.stderr.write(`reelay tests: nats-server ${server.version} (${server.source}: ${server.path})\n`);
  process.env.NATS_SERVER_BIN = server.path;
}
