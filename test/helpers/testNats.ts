import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startNatsServer } from "../../infra/natsServer.ts";

/** A real nats-server for one test file: random loopback port, temporary store, removed on stop. */
export async function startTestNats(): Promise<{ url: string; stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "reelay-test-nats-"));
  const server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
  return {
    url: server.url,
    stop: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
