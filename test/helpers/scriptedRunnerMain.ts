/**
 * A real runner process (the product's runner code, its failpoints, its NATS wiring) whose provider is
 * the scripted vendor: crash tests kill it with SIGKILL without paying for ffmpeg renders. Each task
 * succeeds after SCRIPTED_STATUS_CALLS status calls (polled every 50 ms).
 */
import { loadConfig } from "../../services/shared/config.ts";
import { createLogger } from "../../services/shared/log.ts";
import { connectNats } from "../../services/shared/nats.ts";
import { drainWithin } from "../../services/cli/natsContext.ts";
import { startRunner } from "../../services/runner/main.ts";
import { ScriptedVendor } from "../fakes/scriptedVendor.ts";

const log = createLogger("runner");
const vendor = new ScriptedVendor({ pollEveryMs: 50, pollMaxEveryMs: 50 });
vendor.generation = { kind: "succeed", after: Number(process.env.SCRIPTED_STATUS_CALLS ?? 1) };
const nats = await connectNats(process.env.NATS_URL ?? "", "scripted-runner");
const runner = await startRunner(nats, loadConfig(), log, () => vendor);
log.info("reelay services ready");

process.on("SIGTERM", () => {
  void (async () => {
    await runner.stop();
    await drainWithin(nats.nc, 5000);
    process.exit(0);
  })();
});
