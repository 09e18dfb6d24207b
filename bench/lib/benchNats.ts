import { join } from "node:path";
import { startNatsServer } from "../../infra/natsServer.ts";
import { programPid, trackPid } from "./procs.ts";

/** A nats-server for one suite, in its work dir, tracked so it is killed whatever happens to the bench. */
export async function startBenchNats(workDir: string, say: (line: string) => void): Promise<{ url: string; pid: number; version: string; stop(): Promise<void> }> {
  const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say });
  const pid = programPid(nats.pid, "nats-server");
  const untrack = trackPid(pid);
  return {
    url: nats.url,
    pid,
    version: nats.version,
    stop: async () => {
      await nats.stop();
      untrack();
    },
  };
}
