import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../shared/config.ts";
import { environment } from "../shared/environment.ts";
import { ReelayError } from "../shared/errors.ts";
import { MissingProgramError } from "../../infra/binaries.ts";
import { UnsupportedNatsServerError } from "../../infra/natsServerVersion.ts";
import { layoutOptions, openNats } from "./natsContext.ts";

import { SERVICES, type ServiceName } from "./serviceNames.ts";

// Each command's modules load only when it runs: a CLI call (`reelay keys list`) does not pay for
// loading the edge, the runner, metrics and tracing.

const USAGE = `reelay — video generation and chat gateway

  reelay serve [edge|runner|projector ...]   start services (all three by default)
  reelay keys create --account <name>        create an API key (printed alone on the last line)
  reelay keys list [--account <name>]        list key ids
  reelay keys revoke <key-id>                revoke a key
  reelay accounts create <name>              open an account
  reelay accounts credit <name> <yuan>       add prepaid balance (up to 6 decimal places)
  reelay accounts show <name>                balance, reserved, available, last 10 entries
  reelay accounts list                       every account's balance
  reelay audit replay                        rebuild every read model from the streams and compare
  reelay audit task <id>                     a task's event timeline with its ledger effects
  reelay audit account <name> [--json]       an account's ledger with the running balance
  reelay audit upstream [--json]              per model and channel: charged to customers vs reported by upstreams
  reelay channels [--json]                   each runner's upstream channels: rotation, tasks in flight, errors
  reelay infra plan                          how streams and consumers differ from the configured layout
  reelay infra apply                         show those differences, then change them (replicas, ack waits)
  reelay webhooks secret --account <name> [--rotate]
                                             the account's webhook signing secret (alone on the last line)
  reelay webhooks log --account <name>       recent webhook delivery attempts
  reelay tasks watch [--account <name>] [--from <sequence>]
                                             task events as they are appended, until Ctrl-C

Environment: PORT, HOST, REELAY_DATA_DIR, NATS_URL, REELAY_CONFIG, REELAY_PUBLIC_URL (see README).`;

const isService = (name: string): name is ServiceName => (SERVICES as readonly string[]).includes(name);

async function main(argv: string[]): Promise<void> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { account: { type: "string" }, json: { type: "boolean" }, rotate: { type: "boolean" }, from: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  const [command, ...rest] = positionals;
  if (values.help || command === undefined) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  // Both checked before anything starts: a bad variable or file names itself and nothing is touched.
  environment();
  const config = loadConfig();
  switch (command) {
    case "serve": {
      const unknown = rest.filter((name) => !isService(name));
      if (unknown.length > 0) throw new Error(`unknown service ${unknown.join(", ")}; choose from ${SERVICES.join(", ")}`);
      const { serve } = await import("./serve.ts");
      await serve(config, rest.length === 0 ? SERVICES : rest.filter(isService));
      return;
    }
    case "keys":
    case "accounts":
    case "audit":
    case "infra":
    case "webhooks":
    case "channels":
    case "tasks": {
      const { nats, close } = await openNats("reelay-cli", config, (line) => process.stderr.write(`${line}\n`));
      try {
        if (command === "keys") {
          const { keysCommand } = await import("./keysCommand.ts");
          await keysCommand(nats, rest, (name) => (name === "account" ? values.account : undefined));
        }
        if (command === "accounts") await (await import("./accountsCommand.ts")).accountsCommand(nats, rest);
        if (command === "audit") process.exitCode = await (await import("./auditCommand.ts")).auditCommand(nats, rest, values.json ?? false);
        if (command === "channels") process.exitCode = await (await import("./channelsCommand.ts")).channelsCommand(nats, rest, values.json ?? false);
        if (command === "infra") await (await import("./infraCommand.ts")).infraCommand(nats, rest, layoutOptions(config));
        if (command === "tasks") await (await import("./tasksCommand.ts")).tasksCommand(nats, rest, { account: values.account, from: values.from });
        if (command === "webhooks") {
          await (await import("./webhooksCommand.ts")).webhooksCommand(nats, rest, { account: values.account, rotate: values.rotate ?? false });
        }
      } finally {
        await close();
      }
      return;
    }
    default:
      throw new Error(`unknown command "${command}"\n\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const badArguments = String((error as { code?: unknown })?.code ?? "").startsWith("ERR_PARSE_ARGS");
  const known = error instanceof ConfigError || error instanceof MissingProgramError || error instanceof UnsupportedNatsServerError || error instanceof ReelayError || badArguments;
  process.stderr.write(`reelay: ${known ? (error as Error).message : String((error as Error)?.stack ?? error)}\n`);
  process.exit(1);
});
