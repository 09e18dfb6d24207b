// A lock file that holds its holder's pid, for what one process at a time may do in a folder: `npm ci` before
// `npm start` or `npm test` (scripts/ensure-deps.mjs), starting a data dir's embedded nats-server
// (infra/natsServer.ts). Plain JavaScript: ensure-deps takes it before anything is installed or compiled.
import { readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * Runs `work` while holding the lock file at `path`. Another process's lock is waited for, looked at every
 * `pollMs` (`onWait` is told once), unless it is stale: its holder is gone, or it is older than `staleAfterMs`
 * (a holder that died while holding it, whose pid another process now has).
 */
export async function withPidLock(path, { staleAfterMs, pollMs, onWait }, work) {
  let told = false;
  while (!take(path, staleAfterMs)) {
    if (!told) onWait?.();
    told = true;
    await sleep(pollMs);
  }
  try {
    return await work();
  } finally {
    rmSync(path, { force: true });
  }
}

/** Takes the lock, or a stale one; false while another process holds it. */
function take(path, staleAfterMs) {
  try {
    writeFileSync(path, String(process.pid), { flag: "wx" });
    return true;
  } catch (error) {
    if (error.code !== "EEXIST") throw error;
  }
  if (!stale(path, staleAfterMs)) return false;
  rmSync(path, { force: true });
  return take(path, staleAfterMs);
}

function stale(path, staleAfterMs) {
  try {
    const holder = Number(readFileSync(path, "utf8"));
    if (Date.now() - statSync(path).mtimeMs > staleAfterMs) return true;
    process.kill(holder, 0);
    return false;
  } catch (error) {
    // ESRCH: the holder is gone. ENOENT: the lock went meanwhile (its holder finished): the next take decides.
    return error.code === "ESRCH" || error.code === "ENOENT";
  }
}
