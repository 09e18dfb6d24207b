// Runs before `npm start` and `npm test`: installs the locked dependencies when they are missing,
// so a fresh clone needs only the two README commands.
import { existsSync } from "node:fs";
import { spawnSync } from "node:child_process";

const marker = new URL("../node_modules/.package-lock.json", import.meta.url);
if (!existsSync(marker)) {
  console.error("reelay: installing dependencies (npm ci)…");
  const result = spawnSync("npm", ["ci", "--no-audit", "--no-fund"], { stdio: "inherit" });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
