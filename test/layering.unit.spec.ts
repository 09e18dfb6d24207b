import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { cruise, type ICruiseOptions, type ICruiseResult } from "dependency-cruiser";
import extractDepcruiseOptions from "dependency-cruiser/config-utl/extract-depcruise-options";
import extractTSConfig from "dependency-cruiser/config-utl/extract-ts-config";
import { beforeAll, describe, expect, it } from "vitest";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const LAYERS = ["contracts", "machines", "infra", "services"];

let rules: ICruiseOptions;
beforeAll(async () => {
  rules = await extractDepcruiseOptions(join(ROOT, ".dependency-cruiser.mjs"));
});

/** Cruises `dirs` under `baseDir` with the repository's rules; each violation as "rule: from → to". */
async function violations(baseDir: string, dirs: string[]): Promise<string[]> {
  const { output } = await cruise(dirs, { ...rules, baseDir }, undefined, { tsConfig: extractTSConfig(join(ROOT, "tsconfig.json")) });
  return (output as ICruiseResult).summary.violations.map((violation) => `${violation.rule.name}: ${violation.from} → ${violation.to}`);
}

/** A tree of `files` (path → source) in a folder of its own. */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "reelay-layers-"));
  for (const [path, source] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), source);
  }
  return dir;
}

describe("layers (.dependency-cruiser.mjs)", () => {
  it("reelay's sources import only downwards: contracts ← machines ← shared ← domain ← services ← cli", async () => {
    expect(await violations(ROOT, LAYERS)).toEqual([]);
  });

  // Each rule bites: given a tree with one import it forbids, the cruise names that rule.
  it.each([
    ["contracts-are-the-bottom", "contracts/a.ts", "machines/b.ts"],
    ["machines-are-pure", "machines/a.ts", "services/shared/b.ts"],
    ["infra-is-data", "infra/a.ts", "services/shared/b.ts"],
    ["shared-below-domain", "services/shared/a.ts", "services/billing/b.ts"],
    ["domain-below-services", "services/tasks/a.ts", "services/edge/b.ts"],
    ["services-apart", "services/edge/a.ts", "services/runner/b.ts"],
    ["wiring-through-main", "services/cli/a.ts", "services/runner/b.ts"],
    ["console-app-is-browser-code", "services/console/app/a.ts", "services/shared/b.ts"],
  ])("%s: given %s importing %s, the check fails", async (rule, from, to) => {
    const relative = `${"../".repeat(from.split("/").length - 1)}${to}`;
    const dir = tree({ [from]: `import { b } from "${relative}";\nexport const a = b;\n`, [to]: "export const b = 1;\n" });
    expect(await violations(dir, LAYERS.filter((layer) => from.startsWith(layer) || to.startsWith(layer)))).toContain(`${rule}: ${from} → ${to}`);
  });

  it("allows what the layers allow: a service's own modules, the CLI starting a service through its main.ts", async () => {
    const dir = tree({
      "services/edge/a.ts": 'import { b } from "./b.ts";\nexport const a = b;\n',
      "services/edge/b.ts": 'import { c } from "../billing/c.ts";\nexport const b = c;\n',
      "services/billing/c.ts": 'import { d } from "../shared/d.ts";\nexport const c = d;\n',
      "services/shared/d.ts": "export const d = 1;\n",
      "services/cli/serve.ts": 'export const start = () => import("../edge/main.ts");\n',
      "services/edge/main.ts": 'export { a } from "./a.ts";\n',
    });
    expect(await violations(dir, ["services"])).toEqual([]);
  });

  it("no-circular: given two modules importing each other, the check fails", async () => {
    const dir = tree({
      "services/tasks/a.ts": 'import { b } from "./b.ts";\nexport const a = () => b;\n',
      "services/tasks/b.ts": 'import { a } from "./a.ts";\nexport const b = () => a;\n',
    });
    expect(await violations(dir, ["services"])).toContain("no-circular: services/tasks/a.ts → services/tasks/b.ts");
  });
});
