#!/usr/bin/env node
// reelay runs as JavaScript compiled from its TypeScript: `ensureBuild()` returns the folder of the build of the
// sources as they are now, compiling them first when no build of exactly these sources exists (about a second).
// `node scripts/build.mjs` builds and prints that folder. `npm start` (scripts/reelay.mjs), `npm test` and
// .ci/run call it, so no one has to remember a build step.
//
// - A build is named by a hash of what went into it (every source file's path and content, the esbuild
//   version, this script): dist/<hash>/. Sources that changed, a `git checkout`, a new esbuild: a new hash, a
//   new build; sources back as they were: the earlier build again, at no cost. Processes that start at the
//   same time (a test run's children) build at most once each into a folder of their own and rename it into
//   place; whichever rename comes second finds the build there and drops its own.
// - A build holds one bundle per way into reelay (ENTRIES: the `reelay` command, the thread a service runs in),
//   at the entry's path (dist/<hash>/services/cli/main.js for services/cli/main.ts), with the packages it uses
//   in it. Loading one file instead of about 250 of reelay's and 600 of its packages' took a process's start
//   from about 1.2 s of CPU to 0.4 (docs/benchmarks.md, "Start-up and the suite"): every `reelay` command, every
//   service thread. Code only some commands need (a service, a subcommand) is in the bundle but runs only when
//   imported. Files that are not code are read from the sources (infra/packageRoot.ts).
// - Left out of the bundles, loaded from node_modules: esbuild (the edge bundles the console with it, and it
//   finds its own binary), and the chat tokenizer (services/edge/chat/tokenCount.ts requires it when first used).
// - The console's app (services/console/app) is browser code, bundled by the edge at start: not compiled here.
// - `{ testTools: true }` (the test run's set-up) also bundles the processes tests start beside reelay's (the
//   scripted runner, probes: TEST_TOOL_ENTRIES), so those start as reelay's do.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, utimesSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const SOURCE_DIRS = ["contracts", "machines", "services", "infra"];
const TEST_TOOL_DIRS = [join("test", "helpers"), join("test", "fakes"), join("test", "probes")];
const BROWSER_CODE = join("services", "console", "app");
const DIST = join(ROOT, "dist");
/** Builds kept besides the newest: a process started from one (a `reelay serve` still running) keeps its files. */
const KEEP_BUILDS = 4;

function sourceFiles(dir = "", found = []) {
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (path !== BROWSER_CODE) sourceFiles(path, found);
    } else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts")) found.push(path);
  }
  return found;
}

function esbuildVersion() {
  return JSON.parse(readFileSync(join(ROOT, "node_modules", "esbuild", "package.json"), "utf8")).version;
}

/** The hash that names the build of the sources as they are now. */
function buildHash(files) {
  const hash = createHash("sha256").update(`esbuild ${esbuildVersion()}\0`).update(readFileSync(fileURLToPath(import.meta.url)));
  for (const file of files) hash.update(`\0${file.split(sep).join("/")}\0`).update(readFileSync(join(ROOT, file)));
  return hash.digest("hex").slice(0, 16);
}

/** The modules a process or thread starts from: each gets a bundle of its own. */
const ENTRIES = ["services/cli/main.ts", "services/cli/serviceThread.ts"];
const TEST_TOOL_ENTRIES = ["test/helpers/scriptedRunnerMain.ts", "test/probes/echoMemoryProbe.ts", "test/probes/renderShortOfFilesProbe.ts"];
/** Packages loaded from node_modules at run time (see above). */
const NOT_BUNDLED = ["esbuild", "gpt-tokenizer"];

/**
 * The bundles' packages include CommonJS ones, whose `require` of Node's own modules needs a real `require`
 * in an ES module.
 */
const REQUIRE_IN_ESM = 'import { createRequire as reelayCreateRequire } from "node:module"; const require = reelayCreateRequire(import.meta.url);';

async function compile(entries, outdir) {
  const { build } = await import("esbuild");
  await build({
    absWorkingDir: ROOT,
    entryPoints: entries,
    outdir,
    outbase: ".",
    bundle: true,
    external: NOT_BUNDLED,
    banner: { js: REQUIRE_IN_ESM },
    platform: "node",
    format: "esm",
    target: "node20",
    sourcemap: "linked",
    logLevel: "error",
  });
}

/** Removes all but the newest builds (by the time each was last used). */
function pruneBuilds() {
  const builds = readdirSync(DIST, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && /^[0-9a-f]{16}$/.test(entry.name))
    .map((entry) => ({ path: join(DIST, entry.name), used: statSync(join(DIST, entry.name)).mtimeMs }))
    .sort((a, b) => b.used - a.used);
  for (const old of builds.slice(KEEP_BUILDS)) rmSync(old.path, { recursive: true, force: true });
}

/**
 * The folder of the build of the current sources, built first when missing. `say` hears one line when a
 * build is made.
 */
export async function ensureBuild({ testTools = false, say = (line) => process.stderr.write(`${line}\n`) } = {}) {
  const files = [...SOURCE_DIRS, ...(testTools ? TEST_TOOL_DIRS : [])].flatMap((dir) => sourceFiles(dir)).sort();
  const dir = join(DIST, buildHash(files));
  if (existsSync(join(dir, "services", "cli", "main.js"))) {
    const now = new Date();
    utimesSync(dir, now, now);
    return dir;
  }
  const started = Date.now();
  mkdirSync(DIST, { recursive: true });
  const work = join(DIST, `.building-${process.pid}-${Math.random().toString(36).slice(2)}`);
  try {
    await compile([...ENTRIES, ...(testTools ? TEST_TOOL_ENTRIES : [])], work);
    try {
      renameSync(work, dir);
    } catch (error) {
      // Another process made the same build meanwhile: theirs is as good as ours.
      if (!existsSync(join(dir, "services", "cli", "main.js"))) throw error;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  say(`reelay: compiled ${files.length} files into bundles in ${relative(ROOT, dir)} in ${Date.now() - started} ms`);
  pruneBuilds();
  return dir;
}

/** A compiled module's URL, for `import()` or a worker: `entry` is its source path ("services/cli/main.ts"). */
export const compiledUrl = (dir, entry) => pathToFileURL(join(dir, entry.replace(/\.ts$/, ".js"))).href;

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.stdout.write(`${await ensureBuild()}\n`);
}
