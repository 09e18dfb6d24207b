import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { locateProgram, WRK } from "../../infra/binaries.ts";
import { spawnTracked, waitForExit } from "./procs.ts";

/** wrk's path, found (or installed, as root on Debian) at the first run: a fresh machine has none. */
let wrkPath: string | undefined;

export interface WrkOptions {
  url: string;
  /** Where to write the generated Lua script. */
  workDir: string;
  name: string;
  cpu: string;
  connections: number;
  durationS: number;
  timeoutS?: number;
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  body?: string;
  /** Stop after this many responses (counted in Lua; wrk has no request-count option). */
  maxResponses?: number;
  /** Also count responses whose body contains this string (costs wrk a body copy per response). */
  bodyMarker?: string;
  /** Authorization headers taken in turn, one per request (many accounts' keys on one connection pool). */
  authorizations?: readonly string[];
}

const WrkSummary = z.object({
  requests: z.number(),
  duration_us: z.number(),
  p50_us: z.number(),
  p99_us: z.number(),
  max_us: z.number(),
  errors: z.object({ connect: z.number(), read: z.number(), write: z.number(), status: z.number(), timeout: z.number() }),
  responses: z.number(),
  ok: z.number(),
  marked: z.number(),
  stopped: z.number(),
});

const STOP_DELAY_S = 0.05;

export interface WrkResult {
  requests: number;
  durationS: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Non-2xx/3xx answers plus socket errors and timeouts. */
  errors: number;
  /** Responses seen by the Lua counter (only when maxResponses or bodyMarker is set). */
  responses: number;
  status200: number;
  marked: number;
}

const luaString = (value: string) => JSON.stringify(value); // a JSON string literal is a valid Lua string literal here

function script(options: WrkOptions): string {
  const lines = [`wrk.method = ${luaString(options.method ?? "GET")}`];
  for (const [name, value] of Object.entries(options.headers ?? {})) lines.push(`wrk.headers[${luaString(name)}] = ${luaString(value)}`);
  if (options.body !== undefined) lines.push(`wrk.body = ${luaString(options.body)}`);
  if (options.authorizations?.length) {
    lines.push(
      `local authorizations = { ${options.authorizations.map(luaString).join(", ")} }`,
      "local turn = 0",
      "function request()",
      "  turn = turn % #authorizations + 1",
      '  wrk.headers["Authorization"] = authorizations[turn]',
      "  return wrk.format()",
      "end",
    );
  }
  lines.push("local threads = {}", "function setup(thread) table.insert(threads, thread) end", "responses, ok, marked, stopped = 0, 0, 0, 0");
  // Defining response() makes wrk parse every reply; only do it when a count or marker is asked for.
  if (options.maxResponses !== undefined || options.bodyMarker !== undefined) {
    lines.push(
      "function response(status, headers, body)",
      "  responses = responses + 1",
      "  if status == 200 then ok = ok + 1 end",
      options.bodyMarker !== undefined ? `  if body and string.find(body, ${luaString(options.bodyMarker)}, 1, true) then marked = marked + 1 end` : "",
      // wrk ends at -d only, and reports -d as the duration. Once this thread has stopped, SIGINT ends the run
      // at once (wrk's main thread gets it); the 50 ms head start is taken off the duration afterwards.
      options.maxResponses !== undefined
        ? `  if responses >= ${Math.max(1, Math.floor(options.maxResponses))} and stopped == 0 then stopped = 1; wrk.thread:stop(); ` +
            `os.execute("(sleep ${STOP_DELAY_S}; kill -INT $PPID) >/dev/null 2>&1 &") end`
        : "",
      "end",
    );
  }
  lines.push(
    "function done(summary, latency, requests)",
    "  local r, o, m, st = 0, 0, 0, 0",
    "  for _, t in ipairs(threads) do r = r + (t:get('responses') or 0); o = o + (t:get('ok') or 0); m = m + (t:get('marked') or 0); st = st + (t:get('stopped') or 0) end",
    "  local e = summary.errors",
    '  io.write(string.format(\'BENCHJSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"max_us":%d,' +
      '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},"responses":%d,"ok":%d,"marked":%d,"stopped":%d}\\n\',',
    "    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), latency.max,",
    "    e.connect, e.read, e.write, e.status, e.timeout, r, o, m, st))",
    "end",
  );
  return lines.filter((line) => line !== "").join("\n");
}

/** Runs wrk (one thread, pinned to `cpu`) and returns its summary, parsed from a Lua `done` hook. */
export async function runWrk(options: WrkOptions): Promise<WrkResult> {
  const scriptPath = join(options.workDir, `${options.name}.lua`);
  writeFileSync(scriptPath, script(options));
  const args = [
    "-t1",
    `-c${options.connections}`,
    `-d${options.durationS}s`,
    `--timeout`,
    `${options.timeoutS ?? 10}s`,
    "-s",
    scriptPath,
    options.url,
  ];
  wrkPath ??= locateProgram(WRK, (line) => process.stderr.write(`[bench] ${line}\n`));
  const wrk = spawnTracked(`wrk ${options.name}`, wrkPath, args, { cpu: options.cpu });
  const output = await waitForExit(wrk, (options.durationS + (options.timeoutS ?? 10) + 15) * 1000);
  const line = /^BENCHJSON (.*)$/m.exec(output)?.[1];
  if (!line) throw new Error(`wrk ${options.name} printed no summary:\n${output.slice(-2000)}`);
  const s = WrkSummary.parse(JSON.parse(line));
  const durationS = s.duration_us / 1e6 - (s.stopped > 0 ? STOP_DELAY_S : 0);
  const e = s.errors;
  return {
    requests: s.requests,
    durationS,
    rps: durationS > 0 ? s.requests / durationS : 0,
    p50Ms: s.p50_us / 1000,
    p99Ms: s.p99_us / 1000,
    maxMs: s.max_us / 1000,
    errors: e.connect + e.read + e.write + e.status + e.timeout,
    responses: s.responses,
    status200: s.ok,
    marked: s.marked,
  };
}
