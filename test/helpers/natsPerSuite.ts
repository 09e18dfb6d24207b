import { afterAll, beforeAll } from "vitest";
import { connectNats, type Nats } from "../../services/shared/nats.ts";
import { startTestNats } from "./testNats.ts";

/** What `natsPerSuite` gives its describe block's tests. */
export interface SuiteNats {
  /** A connection with reelay's streams and buckets made. */
  readonly nats: Nats;
  /** The server's address, for the processes a test starts. */
  readonly url: string;
}

/**
 * A real nats-server (startTestNats) and a connection to it, for the describe block this is called in: started
 * before its first test, closed and removed after its last. Read `nats` and `url` in tests and hooks only.
 */
export function natsPerSuite(connectionName: string, leaseMs: number): SuiteNats {
  let server: Awaited<ReturnType<typeof startTestNats>> | undefined;
  let connection: Nats | undefined;
  beforeAll(async () => {
    server = await startTestNats();
    connection = await connectNats(server.url, connectionName, { replicas: 1, leaseMs });
  });
  afterAll(async () => {
    await connection?.nc.close();
    await server?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error("natsPerSuite: read before its describe block's beforeAll ran");
    return value;
  };
  return {
    get nats() {
      return started(connection);
    },
    get url() {
      return started(server).url;
    },
  };
}
