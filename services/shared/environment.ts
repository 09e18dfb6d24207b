import { ReelayEnvironment } from "../../contracts/environment.ts";
import { ConfigError } from "./config.ts";

let cached: ReelayEnvironment | undefined;

/** The parsed environment (read once per process); a bad variable is a ConfigError naming it. */
export function environment(env: NodeJS.ProcessEnv = process.env): ReelayEnvironment {
  if (env === process.env && cached) return cached;
  const parsed = ReelayEnvironment.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".")}=${JSON.stringify(env[String(issue.path[0])] ?? "")}: ${issue.message}`);
    throw new ConfigError(`invalid environment:\n  ${problems.join("\n  ")}`);
  }
  if (env === process.env) cached = parsed.data;
  return parsed.data;
}
