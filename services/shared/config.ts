import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ReelayConfig } from "../../contracts/config.ts";
import { PACKAGE_ROOT } from "../../infra/packageRoot.ts";

export const DEFAULT_CONFIG_PATH = join(PACKAGE_ROOT, "infra", "reelay.config.json");

export class ConfigError extends Error {}

/** Reads and validates the model/provider config; a bad file stops start-up with the field named. */
export function loadConfig(path = process.env.REELAY_CONFIG || DEFAULT_CONFIG_PATH): ReelayConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new ConfigError(`cannot read config ${path}: ${(error as Error).message}`);
  }
  const parsed = ReelayConfig.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".") || "(root)"}: ${issue.message}`);
    throw new ConfigError(`invalid config ${path}:\n  ${problems.join("\n  ")}`);
  }
  return parsed.data;
}
