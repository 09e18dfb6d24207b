import { runWithNats } from "../../services/cli/natsCommands.ts";
import type { TestApp } from "./testApp.ts";

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `reelay <args>` in this process, on the test app's NATS connection: the same commands, output and exit
 * codes as the binary, without a process start per call (when the CLI ran through tsx, starting it cost
 * most of these files' time; compiled, a start is still about 0.4 s). The binary itself is still run by one
 * test per command family.
 */
export async function reelayInProcess(app: TestApp, ...args: string[]): Promise<CliResult> {
  let stdout = "";
  let stderr = "";
  const code = await runWithNats(app.nats, app.config, args, { out: (line) => (stdout += `${line}\n`), err: (line) => (stderr += `${line}\n`) });
  return { code, stdout, stderr };
}
