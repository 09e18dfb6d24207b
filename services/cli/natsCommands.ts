import { parseArgs } from "node:util";
import type { ReelayConfig } from "../../contracts/config.ts";
import type { Nats } from "../shared/nats.ts";
import type { CliIo } from "./cliIo.ts";
import { layoutOptions } from "./natsContext.ts";
import { isOperatorError } from "./operatorErrors.ts";

/** The commands that work against NATS (everything but `serve`). */
export const NATS_COMMANDS = ["keys", "accounts", "audit", "infra", "webhooks", "channels", "tasks", "admin"] as const;

export const parseCliArgs = (argv: string[]) =>
  parseArgs({
    args: argv,
    allowPositionals: true,
    options: { account: { type: "string" }, name: { type: "string" }, json: { type: "boolean" }, rotate: { type: "boolean" }, "drop-previous": { type: "boolean" }, "idempotency-key": { type: "string" }, from: { type: "string" }, help: { type: "boolean", short: "h" } },
  });

type CliValues = ReturnType<typeof parseCliArgs>["values"];

/**
 * Runs one NATS command on an open connection; resolves to the exit code. Each command's module loads only
 * when it runs: `reelay keys list` does not pay for loading the edge, the runner, metrics and tracing.
 */
export async function runNatsCommand(nats: Nats, config: ReelayConfig, command: string, rest: string[], values: CliValues, io: CliIo): Promise<number> {
  switch (command) {
    case "keys":
      await (await import("./keysCommand.ts")).keysCommand(nats, rest, (name) => (name === "account" ? values.account : undefined), io);
      return 0;
    case "accounts":
      await (await import("./accountsCommand.ts")).accountsCommand(nats, rest, { idempotencyKey: values["idempotency-key"] }, io);
      return 0;
    case "audit":
      return (await import("./auditCommand.ts")).auditCommand(nats, rest, values.json ?? false, io);
    case "channels":
      return (await import("./channelsCommand.ts")).channelsCommand(nats, rest, values.json ?? false, io);
    case "infra":
      await (await import("./infraCommand.ts")).infraCommand(nats, rest, layoutOptions(config), io);
      return 0;
    case "tasks":
      await (await import("./tasksCommand.ts")).tasksCommand(nats, rest, { account: values.account, from: values.from }, io);
      return 0;
    case "admin":
      await (await import("./adminCommand.ts")).adminCommand(nats, rest, { name: values.name }, io);
      return 0;
    case "webhooks":
      await (await import("./webhooksCommand.ts")).webhooksCommand(nats, rest, { account: values.account, rotate: values.rotate ?? false, dropPrevious: values["drop-previous"] ?? false }, io);
      return 0;
    default:
      throw new Error(`unknown command "${command}"`);
  }
}

/** How a failed command reads on stderr: its message for errors we raise on purpose, the stack for anything else. */
export function failureLine(error: unknown): string {
  return `reelay: ${isOperatorError(error) ? error.message : String((error as Error)?.stack ?? error)}`;
}

/** `reelay <args>` for a NATS command on a connection already open (what tests call in-process): the exit code. */
export async function runWithNats(nats: Nats, config: ReelayConfig, argv: string[], io: CliIo): Promise<number> {
  try {
    const { positionals, values } = parseCliArgs(argv);
    const [command = "", ...rest] = positionals;
    return await runNatsCommand(nats, config, command, rest, values, io);
  } catch (error) {
    io.err(failureLine(error));
    return 1;
  }
}
