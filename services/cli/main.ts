import { loadConfig } from "../shared/config.ts";
import { environment } from "../shared/environment.ts";
import { ValidationError } from "../shared/errors.ts";
import { processIo } from "./cliIo.ts";
import { failureLine, NATS_COMMANDS, parseCliArgs, runNatsCommand } from "./natsCommands.ts";
import { openNats } from "./natsContext.ts";
import { SERVICES, type ServiceName } from "./serviceNames.ts";

const USAGE = `reelay — video generation and chat gateway

  reelay serve [edge|runner|projector ...]   start services (all three by default)
  reelay keys create --account <name>        create an API key (printed alone on the last line)
  reelay admin tokens create --name <name>   create an admin token for the admin API and console (last line)
  reelay admin tokens list | revoke <id|name>
  reelay keys list [--account <name>]        list key ids
  reelay keys revoke <key-id>                revoke a key
  reelay accounts create <name>              open an account
  reelay accounts credit <name> <yuan> [--idempotency-key <key>]
                                             add prepaid balance (up to 6 decimal places); with a key, a retry credits once
  reelay accounts limit <name> <yuan>        how far below zero the balance may go (default 0)
  reelay accounts show <name>                balance, reserved, available, last 10 entries
  reelay accounts list                       every account's balance
  reelay audit replay                        rebuild every read model from the streams and compare
  reelay audit charges [--json]              every ended task's money: each success charged once, each failure free
  reelay audit task <id>                     a task's event timeline with its ledger effects
  reelay audit account <name> [--json]       an account's ledger with the running balance
  reelay audit upstream [--json]             per model and channel: charged to customers vs reported by upstreams
  reelay channels [--json]                   each runner's upstream channels: rotation, tasks in flight, errors
  reelay infra plan                          how streams and consumers differ from the configured layout
  reelay infra apply                         show those differences, then change them (replicas, ack waits)
  reelay webhooks secret --account <name> [--rotate | --drop-previous]
                                             the account's webhook signing secret (alone on the last line)
  reelay webhooks log --account <name>       recent webhook delivery attempts
  reelay tasks watch [--account <name>] [--from <sequence>]
                                             task events as they are appended, until Ctrl-C

Environment: PORT, HOST, REELAY_DATA_DIR, NATS_URL, REELAY_CONFIG, REELAY_PUBLIC_URL (see README).`;

const isService = (name: string): name is ServiceName => (SERVICES as readonly string[]).includes(name);
const isNatsCommand = (name: string): boolean => (NATS_COMMANDS as readonly string[]).includes(name);

async function main(argv: string[]): Promise<void> {
  const { positionals, values } = parseCliArgs(argv);
  const [command, ...rest] = positionals;
  if (values.help || command === undefined) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  // Both checked before anything starts: a bad variable or file names itself and nothing is touched.
  environment();
  const config = loadConfig();
  if (command === "serve") {
    const unknown = rest.filter((name) => !isService(name));
    if (unknown.length > 0) throw new ValidationError(`unknown service ${unknown.join(", ")}; choose from ${SERVICES.join(", ")}`);
    const { serve } = await import("./serve.ts");
    await serve(config, rest.length === 0 ? SERVICES : rest.filter(isService));
    return;
  }
  if (!isNatsCommand(command)) throw new ValidationError(`unknown command "${command}"\n\n${USAGE}`);
  const { nats, close } = await openNats("reelay-cli", config, (line) => process.stderr.write(`${line}\n`));
  try {
    process.exitCode = await runNatsCommand(nats, config, command, rest, values, processIo);
  } finally {
    await close();
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`${failureLine(error)}\n`);
  process.exit(1);
});
