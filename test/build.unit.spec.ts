import { readFileSync } from "node:fs";
import { isBuiltin } from "node:module";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ensureBuild } from "../scripts/build.mjs";

/** The specifiers of a module's static imports and re-exports (esbuild writes each on a line of its own). */
function staticImports(code: string): string[] {
  return [...code.matchAll(/^(?:import|export)\b[^;]*?["']([^"']+)["'];/gm)].map((match) => match[1] ?? "");
}

describe("reelay's build: a bundle per way in", () => {
  it("given the build of the sources as they are, then each bundle imports only Node's own modules at load: packages are inside, and esbuild and the tokenizer are loaded when first used", async () => {
    const build = await ensureBuild({ say: () => {} });
    for (const entry of ["services/cli/main.js", "services/cli/serviceThread.js"]) {
      const imports = staticImports(readFileSync(join(build, entry), "utf8"));
      expect(imports.length, entry).toBeGreaterThan(0);
      expect(imports.filter((specifier) => !isBuiltin(specifier)), entry).toEqual([]);
    }
  });
});
