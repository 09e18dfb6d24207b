import { spawn } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";

/**
 * scripts/ensure-deps.mjs (run before `npm start` and `npm test`) in a folder of its own, with an `npm` on PATH
 * that stands in for `npm ci`: it notes each run, takes its time, then writes the marker of an install.
 */
function checkout(): { dir: string; runs: () => number; ensureDeps: () => Promise<{ code: number | null; stderr: string }> } {
  const dir = mkdtempSync(join(tmpdir(), "reelay-ensure-deps-"));
  for (const file of ["scripts/ensure-deps.mjs", "scripts/npmEngineWarnings.mjs", "infra/pidLock.mjs"]) {
    mkdirSync(join(dir, file, ".."), { recursive: true });
    copyFileSync(fileURLToPath(new URL(`../${file}`, import.meta.url)), join(dir, file));
  }
  const bin = join(dir, "bin");
  mkdirSync(bin);
  const fakeNpm = join(bin, "npm");
  writeFileSync(fakeNpm, `#!/bin/sh\necho run >> "${join(dir, "npm-runs")}"\nsleep 1\nmkdir -p "${join(dir, "node_modules")}"\necho '{}' > "${join(dir, "node_modules", ".package-lock.json")}"\n`);
  chmodSync(fakeNpm, 0o755);
  const ensureDeps = () =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [join(dir, "scripts", "ensure-deps.mjs")], { env: { ...process.env, PATH: `${bin}:${process.env.PATH}` }, stdio: ["ignore", "ignore", "pipe"] });
      let stderr = "";
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      child.on("close", (code) => resolve({ code, stderr }));
    });
  const runs = () => (existsSync(join(dir, "npm-runs")) ? readFileSync(join(dir, "npm-runs"), "utf8").trim().split("\n").length : 0);
  return { dir, runs, ensureDeps };
}

describe("installing the dependencies before npm start and npm test", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it("two processes started at once on a fresh clone run npm ci once; the other waits for it and says so (both ran it into one node_modules)", async () => {
    const { dir, runs, ensureDeps } = checkout();
    dirs.push(dir);
    const [first, second] = await Promise.all([ensureDeps(), ensureDeps()]);
    expect([first.code, second.code]).toEqual([0, 0]);
    expect(runs()).toBe(1);
    expect(first.stderr + second.stderr).toContain("another process is installing the dependencies (npm ci); waiting for it");
    expect(existsSync(join(dir, ".npm-ci.lock"))).toBe(false);
    // Installed: nothing more to do.
    expect((await ensureDeps()).code).toBe(0);
    expect(runs()).toBe(1);
  });

  it("a lock left by an install that was killed is taken over", async () => {
    const { dir, runs, ensureDeps } = checkout();
    dirs.push(dir);
    // No process has this pid (above the kernel's pid_max of 4194304).
    writeFileSync(join(dir, ".npm-ci.lock"), "4194305");
    expect((await ensureDeps()).code).toBe(0);
    expect(runs()).toBe(1);
  });
});
