/**
 * `npm run bench [-- --only <suite>]`: runs the benchmark suites one after another and prints one table.
 * A suite is a function returning rows; add one with a line in SUITES. Suites in files that may not exist
 * yet (written by someone else) are loaded only when their file is there.
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { printTable, type BenchRow } from "./table.ts";

interface Suite {
  name: string;
  /** Absent when the suite's file is not in the tree. */
  run: (() => Promise<BenchRow[]>) | undefined;
}

const here = dirname(fileURLToPath(import.meta.url));
/** Upper bound for the whole run; suites bound their own phases well inside it. */
const WATCHDOG_MS = 8 * 60_000;

/** A suite exported as `exportName` from `bench/<file>`, if that file exists. */
function optionalSuite(name: string, file: string, exportName: string): Suite {
  const path = join(here, file);
  if (!existsSync(path)) return { name, run: undefined };
  return {
    name,
    run: async () => {
      const module: Record<string, unknown> = await import(pathToFileURL(path).href);
      const suite = module[exportName];
      if (typeof suite !== "function") throw new Error(`${file} does not export a function ${exportName}`);
      const rows: unknown = await (suite as () => Promise<unknown>)();
      if (!Array.isArray(rows)) throw new Error(`${exportName} did not return an array of rows`);
      return rows as BenchRow[];
    },
  };
}

const SUITES: Suite[] = [
  optionalSuite("video", "suites/videoPath.ts", "videoPathBench"),
  optionalSuite("ledger", "suites/ledgerReplay.ts", "ledgerReplayBench"),
  optionalSuite("chat", "suites/chatRelay.ts", "chatRelayBench"),
  optionalSuite("events", "suites/taskEvents.ts", "taskEventsBench"),
  optionalSuite("instant", "suites/instantTasks.ts", "instantTasksBench"),
  optionalSuite("ark", "suites/arkTasks.ts", "arkTasksBench"),
  optionalSuite("openai-videos", "suites/openAiVideosCreate.ts", "openAiVideosCreateBench"),
  optionalSuite("console", "suites/consoleLoad.ts", "consoleLoadBench"),
  optionalSuite("catchup", "suites/readModelCatchUp.ts", "readModelCatchUpBench"),
  optionalSuite("patches", "suites/natsClientPatches.ts", "natsClientPatchesBench"),
];

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { only: { type: "string" } } });
  const known = SUITES.map((s) => s.name);
  if (values.only !== undefined && !known.includes(values.only)) {
    process.stderr.write(`unknown suite "${values.only}"; choose from ${known.join(", ")}\n`);
    return 2;
  }
  const selected = SUITES.filter((s) => values.only === undefined || s.name === values.only);
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  let failed = false;
  for (const suite of selected) {
    if (!suite.run) {
      notes.push(`suite ${suite.name}: not in the tree yet, skipped`);
      continue;
    }
    const started = performance.now();
    process.stderr.write(`[bench] suite ${suite.name}\n`);
    try {
      rows.push(...(await suite.run()));
      notes.push(`suite ${suite.name}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
    } catch (error) {
      failed = true;
      notes.push(`suite ${suite.name} FAILED: ${(error as Error).stack ?? String(error)}`);
    }
  }
  printTable(rows, notes);
  return failed ? 1 : 0;
}

// Ctrl-C and the watchdog go through process.exit, so the exit hook in lib/procs.ts kills every child.
process.on("SIGINT", () => process.exit(130));
process.on("SIGTERM", () => process.exit(143));
const watchdog = setTimeout(() => {
  process.stderr.write(`[bench] still running after ${WATCHDOG_MS / 60_000} min: giving up\n`);
  process.exit(124);
}, WATCHDOG_MS);
watchdog.unref();

process.exit(await main());
