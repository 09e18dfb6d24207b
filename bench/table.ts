import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** One measured figure. `ratio` is value / baseline when a baseline applies. */
export interface BenchRow {
  suite: string;
  metric: string;
  value: number;
  unit: string;
  baseline?: number;
  ratio?: number;
  /**
   * ">= 0.5", "<= 2x", ">= 500/s": a bare number or one ending in "x" is checked against `ratio`
   * (when the row has one); a number with any other suffix is checked against `value`.
   */
  target?: string;
}

export const RESULTS_FILE = join(dirname(fileURLToPath(import.meta.url)), "results", "latest.json");

const TARGET = /^\s*(>=|<=|>|<)\s*([0-9]+(?:\.[0-9]+)?)\s*(\S*)\s*$/;

/** "ok", "MISS", "" (no target) or "?" (a target this printer cannot read). */
export function verdict(row: BenchRow): string {
  if (row.target === undefined) return "";
  const match = TARGET.exec(row.target);
  if (!match) return "?";
  const [, op, num, suffix] = match;
  const limit = Number(num);
  const againstRatio = (suffix === "" || suffix === "x") && row.ratio !== undefined;
  const actual = againstRatio ? row.ratio : row.value;
  if (actual === undefined || !Number.isFinite(actual)) return "MISS";
  const ok = op === ">=" ? actual >= limit : op === "<=" ? actual <= limit : op === ">" ? actual > limit : actual < limit;
  return ok ? "ok" : "MISS";
}

export function formatNumber(value: number | undefined): string {
  if (value === undefined) return "";
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs >= 1000) return Math.round(value).toLocaleString("en-US");
  if (abs >= 100) return value.toFixed(0);
  if (abs >= 10) return value.toFixed(1);
  if (abs >= 1) return value.toFixed(2);
  return value.toFixed(3);
}

/** Renders the rows as an aligned text table. */
export function renderTable(rows: readonly BenchRow[]): string {
  const header = ["suite", "metric", "value", "unit", "baseline", "ratio", "target", "ok"];
  const cells = rows.map((row) => [
    row.suite,
    row.metric,
    formatNumber(row.value),
    row.unit,
    formatNumber(row.baseline),
    formatNumber(row.ratio),
    row.target ?? "",
    verdict(row),
  ]);
  const numeric = new Set([2, 4, 5]);
  const widths = header.map((title, i) => Math.max(title.length, ...cells.map((line) => (line[i] ?? "").length)));
  const render = (line: readonly string[]) =>
    line
      .map((cell, i) => (numeric.has(i) ? cell.padStart(widths[i] ?? 0) : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  const rule = widths.map((w) => "-".repeat(w)).join("  ");
  return [render(header), rule, ...cells.map(render)].join("\n");
}

/** Prints the table to stdout and writes the rows (with verdicts) to bench/results/latest.json. */
export function printTable(rows: readonly BenchRow[], notes: readonly string[] = []): void {
  process.stdout.write(`\n${renderTable(rows)}\n`);
  for (const note of notes) process.stdout.write(`note: ${note}\n`);
  mkdirSync(dirname(RESULTS_FILE), { recursive: true });
  const record = {
    at: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    rows: rows.map((row) => ({ ...row, ok: verdict(row) })),
    notes,
  };
  writeFileSync(RESULTS_FILE, `${JSON.stringify(record, null, 2)}\n`);
  process.stdout.write(`results written to ${RESULTS_FILE}\n`);
}
