/**
 * The top of a V8 CPU profile by package and by function (self time):
 * `node --import tsx bench/tools/profileTop.ts <file.cpuprofile>` — e.g. one written by a bench run with
 * BENCH_CPU_PROF_DIR set (bench/lib/reelayChild.ts), or by bench/tools/queryProfile.ts.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
}

export function summarizeProfile(path: string, top = 40): string {
  const profile = JSON.parse(readFileSync(path, "utf8")) as { nodes: ProfileNode[] };
  const total = profile.nodes.reduce((sum, node) => sum + (node.hitCount ?? 0), 0);
  const byFunction = new Map<string, number>();
  const byPackage = new Map<string, number>();
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    const { functionName, url: source, lineNumber } = node.callFrame;
    const shortUrl = source.replace(/^.*node_modules\//, "").replace(/^file:\/\/.*?\/(services|contracts|machines|infra|bench|test)\//, "$1/");
    const name = `${functionName || "(anonymous)"} ${shortUrl}:${lineNumber + 1}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + hits);
    const inModules = source.includes("node_modules/");
    const pkg = inModules
      ? (source.split("node_modules/").at(-1) ?? "").split("/").slice(0, source.split("node_modules/").at(-1)?.startsWith("@") ? 2 : 1).join("/")
      : source.startsWith("node:")
        ? `node:${source.slice(5).split("/")[0] ?? ""}`
        : source
          ? shortUrl.split("/").slice(0, 2).join("/")
          : functionName;
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + hits);
  }
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
