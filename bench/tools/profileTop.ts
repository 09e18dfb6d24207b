/**
 * The top of a V8 CPU profile by package and by function (self time):
 * `node --import tsx bench/tools/profileTop.ts <file.cpuprofile>` — e.g. one written by a bench run with
 * BENCH_CPU_PROF_DIR set (bench/lib/reelayChild.ts), or by bench/tools/queryProfile.ts.
 */
import { existsSync, readFileSync } from "node:fs";
import { SourceMap, type SourceMapPayload } from "node:module";
import { fileURLToPath } from "node:url";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  hitCount?: number;
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
}

/**
 * A profile with each frame placed where its source is: reelay runs as bundles (scripts/build.mjs), whose
 * frames would all count under one file; the map beside each bundle names the module (or package) and line.
 */
export function readProfile(path: string): CpuProfile {
  const profile = JSON.parse(readFileSync(path, "utf8")) as CpuProfile;
  const maps = new Map<string, SourceMap | undefined>();
  for (const node of profile.nodes) {
    const { url, lineNumber, columnNumber } = node.callFrame;
    if (!url.startsWith("file:") || lineNumber < 0) continue;
    if (!maps.has(url)) maps.set(url, sourceMapBeside(url));
    const entry = maps.get(url)?.findEntry(lineNumber, columnNumber);
    if (!entry || !("originalSource" in entry)) continue;
    node.callFrame = { ...node.callFrame, url: new URL(entry.originalSource, url).href, lineNumber: entry.originalLine, columnNumber: entry.originalColumn };
  }
  return profile;
}

function sourceMapBeside(url: string): SourceMap | undefined {
  const path = `${fileURLToPath(url)}.map`;
  return existsSync(path) ? new SourceMap(JSON.parse(readFileSync(path, "utf8")) as SourceMapPayload) : undefined;
}

/** A frame's file as printed: a package's path from its name on, reelay's from its layer folder on. */
const shortUrlOf = (source: string): string =>
  source.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*?\/(services|contracts|machines|infra|bench|test)\//, "$1/");

/** What a frame is counted under: its npm package, `node:<module>`, reelay's `<layer>/<folder>`, or a native name. */
export function packageOf({ functionName, url: source }: ProfileNode["callFrame"]): string {
  if (source.includes("node_modules/")) {
    const inModules = source.split("node_modules/").at(-1) ?? "";
    return inModules.split("/").slice(0, inModules.startsWith("@") ? 2 : 1).join("/");
  }
  if (source.startsWith("node:")) return `node:${source.slice(5).split("/")[0] ?? ""}`;
  return source ? shortUrlOf(source).split("/").slice(0, 2).join("/") : functionName;
}

/** Samples per package, and what one sample stands for (µs: the profile's span over its sample count). */
export function samplesByPackage(profile: CpuProfile): { byPackage: Map<string, number>; sampleMicros: number } {
  const byPackage = new Map<string, number>();
  let total = 0;
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    total += hits;
    const pkg = packageOf(node.callFrame);
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + hits);
  }
  return { byPackage, sampleMicros: total === 0 ? 0 : (profile.endTime - profile.startTime) / total };
}

export function summarizeProfile(path: string, top = 40): string {
  const profile = readProfile(path);
  const total = profile.nodes.reduce((sum, node) => sum + (node.hitCount ?? 0), 0);
  const byFunction = new Map<string, number>();
  for (const node of profile.nodes) {
    const { functionName, url: source, lineNumber } = node.callFrame;
    const name = `${functionName || "(anonymous)"} ${shortUrlOf(source)}:${lineNumber + 1}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + (node.hitCount ?? 0));
  }
  const { byPackage } = samplesByPackage(profile);
  const percent = (hits: number) => `${((hits / total) * 100).toFixed(1)}%`;
  const lines = [`samples ${total}`, "", "-- by package --"];
  for (const [name, hits] of [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, 25)) lines.push(`${percent(hits)}\t${name}`);
  lines.push("", "-- by function (self) --");
  for (const [name, hits] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) lines.push(`${percent(hits)}\t${name}`);
  return `${lines.join("\n")}\n`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const path = process.argv[2];
  if (!path) throw new Error("usage: bench/tools/profileTop.ts <file.cpuprofile>");
  process.stdout.write(summarizeProfile(path));
}
