import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { serverProcs, startNatsServer } from "../infra/natsServer.ts";

/** A process's stat line, or "" when it ended meanwhile. */
function statOf(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return "";
  }
}

/** The environment of the nats-server under the watchdog shell `shellPid` (its child in /proc). */
function serverEnvironment(shellPid: number): string[] {
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    const stat = statOf(pid);
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    // After the command name: state, then the parent's pid (proc(5)).
    const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (parent === shellPid && comm === "nats-server") return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
  }
  throw new Error(`no nats-server under pid ${shellPid}`);
}

describe("the cores a nats-server reelay starts runs on (GOMAXPROCS)", () => {
  it("takes the operator's GOMAXPROCS as given", () => {
    expect(serverProcs({ GOMAXPROCS: "3" })).toBe("3");
  });

  it("is half the cores this process may use, at least one, when the operator sets none", () => {
    const expected = String(Math.max(1, Math.floor(availableParallelism() / 2)));
    expect(serverProcs({})).toBe(expected);
    expect(serverProcs({ GOMAXPROCS: " " })).toBe(expected);
  });

  it("is what the server it starts runs with", async () => {
    const dir = mkdtempSync(join(tmpdir(), "reelay-gomaxprocs-"));
    const server = await startNatsServer({ storeDir: join(dir, "store"), say: () => {} });
    try {
      expect(serverEnvironment(server.pid)).toContain(`GOMAXPROCS=${serverProcs(process.env)}`);
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
