import { z } from "zod";
import { spawnTsx, waitForExit } from "./procs.ts";

export interface OpenLoopOptions {
  url: string;
  method: "GET" | "POST";
  headers: Record<string, string>;
  body?: string;
  /** Requests per second, sent on schedule whatever the answers. */
  rate: number;
  seconds: number;
  marker?: string;
  connections: number;
  cpu: string;
  recordTo?: string;
  warmPath?: string;
  /** Authorization headers taken in turn, one per request. */
  authorizations?: string[];
}

const OpenLoopResult = z.object({
  sent: z.number(),
  ok: z.number(),
  marked: z.number(),
  errors: z.number(),
  offeredRate: z.number(),
  durationS: z.number(),
  p50Ms: z.number(),
  p99Ms: z.number(),
  maxMs: z.number(),
});
export type OpenLoopResult = z.infer<typeof OpenLoopResult>;

/** Runs `bench/tools/openLoop.ts` pinned to `cpu`: a fixed request rate, latency measured from each request's due time. */
export async function runOpenLoop(name: string, options: OpenLoopOptions): Promise<OpenLoopResult> {
  const { cpu, ...load } = options;
  const child = spawnTsx(`open loop ${name}`, "bench/tools/openLoop.ts", [JSON.stringify(load)], { cpu });
  const output = await waitForExit(child, (options.seconds + 30) * 1000);
  const line = /^BENCHJSON (.*)$/m.exec(output)?.[1];
  if (!line) throw new Error(`open loop ${name} printed no summary:\n${output.slice(-2000)}`);
  return OpenLoopResult.parse(JSON.parse(line));
}
