import type { Plugin } from "vitest/config";

/**
 * Tests load the packages' builds that reelay ships. Vite resolves packages with the `development` condition
 * in a test run (and vitest starts its workers with `--conditions development`), so xstate, whose exports
 * name a development build, ran its development build under test: other files than the bundle's (esbuild
 * resolves without that condition), with checks and warnings of their own. This drops the condition from
 * every environment's resolution and from the workers' flags (vitest reads them from `ssr.resolve`).
 */
export function shippedPackageBuilds(): Plugin {
  const shipped = (conditions: string[]): string[] => conditions.filter((condition) => condition !== "development|production" && condition !== "development");
  return {
    name: "reelay:shipped-package-builds",
    configResolved(config) {
      for (const environment of Object.values(config.environments)) environment.resolve.conditions = shipped(environment.resolve.conditions);
      if (config.ssr.resolve?.conditions) config.ssr.resolve.conditions = shipped(config.ssr.resolve.conditions);
    },
  };
}
