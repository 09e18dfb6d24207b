/**
 * What a tenant's huge chat prompts cost every other tenant: `node --import tsx bench/tools/hostileChatStall.ts [rounds]`
 * (default 3). Starts nats-server and `reelay serve` with the shipped config, then per round sends three chat
 * requests at once, each a body of about 1 MiB in 240 messages of 4,096 random letters (the tokenizer's slow
 * case; the free `echo` model, so no money is needed), while a bystander asks `GET /v1/models` every 20 ms.
 * Prints how long the three took and the bystander's longest wait: the time the edge's thread was held.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as pause } from "node:timers/promises";
import { startNatsServer } from "../../infra/natsServer.ts";
import { loadConfig } from "../../services/shared/config.ts";
import { prepareAccount, startReelay } from "../lib/reelayChild.ts";

const rounds = Number(process.argv[2] ?? 3);
const HOSTILE_REQUESTS = 3;
const MESSAGES = 240;
const MESSAGE_CHARS = 4096;
const BYSTANDER_EVERY_MS = 20;

const workDir = mkdtempSync(join(tmpdir(), "reelay-hostile-chat-"));
const nats = await startNatsServer({ storeDir: join(workDir, "nats"), say: () => {} });
const config = loadConfig();
const key = await prepareAccount(nats.url, workDir, config);
const reelay = await startReelay({ natsUrl: nats.url, config, workDir });
const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" };

const randomLetters = (length: number) => Array.from({ length }, () => String.fromCharCode(97 + Math.floor(Math.random() * 26))).join("");
const hostileBody = () => JSON.stringify({ model: "echo", messages: Array.from({ length: MESSAGES }, () => ({ role: "user", content: randomLetters(MESSAGE_CHARS) })) });

try {
  for (let round = 1; round <= rounds; round++) {
    const bodies = Array.from({ length: HOSTILE_REQUESTS }, hostileBody);
    let flooding = true;
    let longestWaitMs = 0;
    const bystander = (async () => {
      while (flooding) {
        const asked = performance.now();
        await (await fetch(`${reelay.baseUrl}/v1/models`, { headers })).text();
        longestWaitMs = Math.max(longestWaitMs, performance.now() - asked);
        await pause(BYSTANDER_EVERY_MS);
      }
    })();
    const started = performance.now();
    const statuses = await Promise.all(bodies.map(async (body) => (await fetch(`${reelay.baseUrl}/v1/chat/completions`, { method: "POST", headers, body })).status));
    const floodMs = performance.now() - started;
    flooding = false;
    await bystander;
    process.stdout.write(
      `round ${round}: ${HOSTILE_REQUESTS} bodies of ${(bodies[0]?.length ?? 0).toLocaleString("en")} bytes answered ${statuses.join(", ")} in ${floodMs.toFixed(0)} ms; the bystander's longest wait ${longestWaitMs.toFixed(0)} ms\n`,
    );
  }
} finally {
  await reelay.proc.stop(15_000);
  await nats.stop();
  rmSync(workDir, { recursive: true, force: true });
}
