// Runs before `npm start` and `npm test`: installs the locked dependencies when they are missing,
// so a fresh clone needs only the two README commands.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { withPidLock } from "../infra/pidLock.mjs";
import { summarizeEngineWarnings } from "./npmEngineWarnings.mjs";

const marker = new URL("../node_modules/.package-lock.json", import.meta.url);
// Beside node_modules, not in it: npm ci removes node_modules first.
const lock = new URL("../.npm-ci.lock", import.meta.url);

if (!existsSync(marker)) process.exit(await installOnce());

/**
 * `npm ci`, by one process at a time: two started at once in one folder (`npm start` in one terminal, `npm test`
 * in another, on a fresh clone) each removed and wrote node_modules under the other. The others wait for its end.
 * A lock older than an install takes was left by a process that died holding it.
 */
function installOnce() {
  const onWait = () => console.error("reelay: another process is installing the dependencies (npm ci); waiting for it…");
  return withPidLock(lock, { staleAfterMs: 15 * 60_000, pollMs: 500, onWait }, async () => {
    if (existsSync(marker)) return 0;
    console.error("reelay: installing dependencies (npm ci)…");
    return await npmCi();
  });
}

/**
 * `npm ci`, its output passed through but for its engine warnings, which come out as one line: on Node 20
 * (past its end of life) npm prints five lines for each of the packages that ask for Node 22 or newer, about
 * fifty lines a user can do nothing about before reelay's own first line.
 */
function npmCi() {
  return new Promise((resolve) => {
    const child = spawn("npm", ["ci", "--no-audit", "--no-fund"], { stdio: ["inherit", "inherit", "pipe"] });
    const warnings = summarizeEngineWarnings((line) => process.stderr.write(`${line}\n`));
    createInterface({ input: child.stderr, crlfDelay: Infinity }).on("line", warnings.line);
    child.on("error", (error) => {
      console.error(`reelay: could not run npm ci: ${error.message}`);
      resolve(1);
    });
    child.on("close", (code, signal) => {
      warnings.end(process.version);
      resolve(code ?? (signal ? 1 : 0));
    });
  });
}
