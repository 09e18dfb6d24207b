import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * reelay's own folder (the one with its package.json). Files that are not code (the shipped config, the
 * nats-server config, the console's app) are read from there: a module cannot find them beside itself, since
 * it runs from the build in dist/<hash>/ (scripts/build.mjs) as well as from the sources (tests, tools).
 */
export const PACKAGE_ROOT = findPackageRoot(dirname(fileURLToPath(import.meta.url)));

function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}: reelay's files are not where they were installed`);
  }
}
