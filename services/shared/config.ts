import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ReelayConfig } from "../../contracts/config.ts";
import { PACKAGE_ROOT } from "../../infra/packageRoot.ts";

export const DEFAULT_CONFIG_PATH = join(PACKAGE_ROOT, "infra", "reelay.config.json");

export class ConfigError extends Error {}

/** What a field left out reads as (zod's own words: "expected record, received undefined"). */
const MISSING = "is missing";

/** Reads and validates the model/provider config; a bad file stops start-up with the field named. */
export function loadConfig(path = process.env.REELAY_CONFIG || DEFAULT_CONFIG_PATH): ReelayConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new ConfigError(`cannot read config ${path}: ${(error as Error).message}`);
  }
  const parsed = ReelayConfig.safeParse(raw, { error: (issue) => (issue.code === "invalid_type" && issue.input === undefined ? MISSING : undefined) });
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`);
    // An operator who wrote only the part they change finds out why the rest is asked for.
    const sectionMissing = parsed.error.issues.some((issue) => issue.path.length === 1 && issue.message === MISSING);
    const hint = sectionMissing ? `\n(a config file replaces the shipped one whole: start from a copy of ${DEFAULT_CONFIG_PATH})` : "";
    throw new ConfigError(`invalid config ${path}:\n  ${problems.join("\n  ")}${hint}`);
  }
  return parsed.data;
}
