/**
 * Open-loop load: sends requests on a fixed schedule (`rate` per second for `seconds`) whatever the server
 * answers, and times each from when it was *due*, so a server that falls behind shows it in the latency
 * (no coordinated omission, unlike a closed loop such as wrk's). Run as a child (`bench/lib/openLoop.ts`):
 * `node --import tsx bench/tools/openLoop.ts '<json options>'`; prints one `BENCHJSON {...}` line.
 */
import { writeFileSync } from "node:fs";
import { Pool } from "undici";
import { z } from "zod";

const Options = z.object({
  url: z.string().url(),
  method: z.enum(["GET", "POST"]),
  headers: z.record(z.string(), z.string()),
  body: z.string().optional(),
  rate: z.number().positive(),
  seconds: z.number().positive(),
  /** Answers whose body contains this count as `marked`. */
  marker: z.string().optional(),
  connections: z.number().int().positive(),
  /** Writes one line per request (due time as epoch ms, latency ms, answer body) to this file, for analysis. */
  recordTo: z.string().optional(),
  /** Opens the connections first with this many GETs of this path at once (wrk, too, connects before it measures). */
  warmPath: z.string().optional(),
  /** Authorization headers taken in turn, one per request (many accounts' keys). */
  authorizations: z.array(z.string()).optional(),
});

const options = Options.parse(JSON.parse(process.argv[2] ?? "{}"));
const url = new URL(options.url);
const pool = new Pool(url.origin, { connections: options.connections, pipelining: 1 });
const total = Math.round(options.rate * options.seconds);
const latenciesMs: number[] = [];
const records: string[] = [];
let ok = 0;
let marked = 0;
let errors = 0;
let sent = 0;

async function one(dueAt: number): Promise<void> {
  try {
    const authorization = options.authorizations?.[sent % options.authorizations.length];
    const headers = authorization === undefined ? options.headers : { ...options.headers, authorization };
    const answer = await pool.request({ path: url.pathname + url.search, method: options.method, headers, ...(options.body === undefined ? {} : { body: options.body }) });
    const text = await answer.body.text();
    if (answer.statusCode === 200) ok++;
    else errors++;
    if (options.marker !== undefined && text.includes(options.marker)) marked++;
    if (options.recordTo !== undefined) records.push(`${performance.timeOrigin + dueAt}\t${performance.now() - dueAt}\t${text}`);
  } catch {
    errors++;
  }
  latenciesMs.push(performance.now() - dueAt);
}

if (options.warmPath !== undefined) {
  const warmPath = options.warmPath;
  await Promise.all(Array.from({ length: options.connections }, async () => (await pool.request({ path: warmPath, method: "GET" })).body.text()));
}
const started = performance.now();
const inFlight: Array<Promise<void>> = [];
await new Promise<void>((resolve) => {
  const tick = () => {
    const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * options.rate) + 1);
    for (; sent < due; sent++) inFlight.push(one(started + (sent / options.rate) * 1000));
    if (sent >= total) resolve();
    else setTimeout(tick, 1);
  };
  tick();
});
const sendWindowS = (performance.now() - started) / 1000;
await Promise.all(inFlight);
const durationS = (performance.now() - started) / 1000;
await pool.close();
if (options.recordTo !== undefined) writeFileSync(options.recordTo, records.join("\n"));
latenciesMs.sort((a, b) => a - b);
const percentile = (p: number) => latenciesMs[Math.min(latenciesMs.length - 1, Math.floor((p / 100) * latenciesMs.length))] ?? Number.NaN;
process.stdout.write(
  `BENCHJSON ${JSON.stringify({ sent, ok, marked, errors, offeredRate: sent / sendWindowS, durationS, p50Ms: percentile(50), p99Ms: percentile(99), maxMs: latenciesMs.at(-1) ?? Number.NaN })}\n`,
);
