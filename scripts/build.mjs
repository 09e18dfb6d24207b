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
// - The build mirrors the source tree (dist/<hash>/services/cli/main.js for services/cli/main.ts), one
//   JavaScript file per TypeScript file with its relative imports pointing at the compiled neighbours
//   (`./x.ts` → `./x.js`), packages left to node_modules; files that are not code are read from the sources
//   (infra/packageRoot.ts).
// - The console's app (services/console/app) is browser code, bundled by the edge at start: not compiled here.
// - `{ testTools: true }` (the test run's set-up) compiles the processes tests start beside reelay's (the
//   scripted runner, fake upstreams, probes) into a build of their own, so those start as compiled code too.
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

/** esbuild, one output file per source file: every relative import stays an import, of the compiled `.js`. */
const relativeImportsAsJs = {
  name: "relative-imports-as-js",
  setup(build) {
    build.onResolve({ filter: /^\.\.?\// }, (args) =>
      args.kind === "entry-point" ? undefined : { path: args.path.replace(/\.ts$/, ".js"), external: true },
    );
  },
};

async function compile(files, outdir) {
  const { build } = await import("esbuild");
  await build({
    absWorkingDir: ROOT,
    entryPoints: files,
    outdir,
    outbase: ".",
    // Bundling only so the plugin sees each import; every import is external, so each file compiles alone.
    bundle: true,
    packages: "external",
    plugins: [relativeImportsAsJs],
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
    await compile(files, work);
    try {
      renameSync(work, dir);
    } catch (error) {
      // Another process made the same build meanwhile: theirs is as good as ours.
      if (!existsSync(join(dir, "services", "cli", "main.js"))) throw error;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  say(`reelay: compiled ${files.length} files to ${relative(ROOT, dir)} in ${Date.now() - started} ms`);
  pruneBuilds();
  return dir;
}

/** A compiled module's URL, for `import()` or a worker: `entry` is its source path ("services/cli/main.ts"). */
export const compiledUrl = (dir, entry) => pathToFileURL(join(dir, entry.replace(/\.ts$/, ".js"))).href;

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.stdout.write(`${await ensureBuild()}\n`);
}
