import type { Logger } from "../shared/log.ts";
import type { Nats } from "../shared/nats.ts";
import { ProjectorService } from "./projectorService.ts";

/** Starts the projector: folds the event streams into the read models until `stop`. */
export async function startProjector(nats: Nats, log: Logger): Promise<{ stop(): Promise<void> }> {
  const projector = new ProjectorService(nats, log);
  await projector.start();
  return { stop: () => projector.stop() };
}
