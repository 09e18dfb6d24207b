import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { startNatsServer } from "/work/main/infra/natsServer.ts";
import { benchConfig } from "/work/main/bench/suites/videoPath.ts";
import { prepareAccount, startReelay } from "/work/main/bench/lib/reelayChild.ts";
import { varz, varzDelta } from "/work/main/bench/lib/natsStats.ts";

const model = process.argv[2] ?? "Bench-parked";
const N = Number(process.argv[3] ?? 200);
const workDir = mkdtempSync(join(tmpdir(), "msgs-"));
const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
const config = benchConfig();
const key = await prepareAccount(nats.url, workDir, config);
const reelay = await startReelay({ natsUrl: nats.url, config, workDir });
const nc = await connect({ servers: nats.url });
const counts = new Map<string, number>();
const sub = nc.subscribe(">", { callback: (_e, m) => {
  const k = m.subject.startsWith("_INBOX") ? "_INBOX" : m.subject.replace(/\d+/g, "N").replace(/_reelay\.edge\.[0-9a-f]+/, "_reelay.edge.X").split(".").slice(0, 5).join(".");
  counts.set(k, (counts.get(k) ?? 0) + 1);
}});
await new Promise((r) => setTimeout(r, 500));
counts.clear();
const before = await varz(nats.url);
const body = JSON.stringify({ model, prompt: "a fox", duration: 4 });
await Promise.all(Array.from({ length: N }, async () => {
  const r = await fetch(`${reelay.baseUrl}/api/compat/videosGenerations`, { method: "POST", headers: { authorization: `Bearer ${key}`, "content-type": "application/json" }, body });
  await r.text();
}));
await new Promise((r) => setTimeout(r, Number(process.argv[4] ?? 3000)));
const d = varzDelta(before, await varz(nats.url));
console.log("per task in+out", (d.in_msgs + d.out_msgs) / N, "in", d.in_msgs / N, "out", d.out_msgs / N);
for (const [k, v] of [...counts].sort((a, b) => b[1] - a[1])) console.log((v / N).toFixed(2), k);
sub.unsubscribe(); await nc.close(); await reelay.proc.stop(2000); await nats.stop?.();
process.exit(0);
