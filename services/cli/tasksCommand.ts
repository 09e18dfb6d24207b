import type { CliIo } from "./cliIo.ts";
import type { TaskEvent } from "../../contracts/videoTask.ts";
import { ValidationError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";
import { subscribeTaskEvents } from "../tasks/taskEvents.ts";

const USAGE = "usage: reelay tasks watch [--account <name>] [--from <sequence>]";

/** What a person watching wants to see of an event, on one line. */
function describe(event: TaskEvent): string {
  switch (event.type) {
    case "TaskSubmitted":
      return `submitted ${event.data.job.model} ${event.data.job.durationSeconds}s ${event.data.job.ratio} on ${event.data.job.provider}`;
    case "UpstreamAccepted":
      return `accepted upstream as ${event.data.providerTaskId}`;
    case "GenerationStarted":
      return "running";
    case "GenerationSucceeded":
      return `succeeded: ${event.data.resolution}, ${event.data.durationSeconds}s, ${event.data.totalTokens} tokens`;
    case "GenerationFailed":
      return `failed (${event.data.stage}): ${event.data.reason}`;
    default:
      return (event as { type: string }).type;
  }
}

/**
 * A watch that stops printing looks like a quiet system: say when the connection goes and comes back. (The
 * embedded server of a data dir stops with the `reelay serve` that started it; the next one listens elsewhere.)
 */
async function sayConnectionChanges(nats: Nats, io: CliIo): Promise<void> {
  for await (const status of nats.nc.status()) {
    if (status.type === "disconnect") io.err(`lost the connection to NATS at ${status.server}; reconnecting (Ctrl-C stops). An embedded server stops with the reelay serve that ran it: then run the watch again`);
    else if (status.type === "reconnect") io.err(`reconnected to NATS at ${status.server}; watching again`);
  }
}

/** `reelay tasks watch`: every task event as it is appended (or from a sequence), until Ctrl-C. */
export async function tasksCommand(nats: Nats, args: string[], options: { account: string | undefined; from: string | undefined }, io: CliIo): Promise<void> {
  if (args[0] !== "watch") throw new ValidationError(USAGE);
  const from = options.from === undefined ? "new" : Number(options.from);
  if (from !== "new" && (!Number.isInteger(from) || from < 1)) throw new ValidationError(`--from must be a stream sequence (a positive integer)\n${USAGE}`);
  const stopped = new AbortController();
  process.once("SIGINT", () => stopped.abort());
  process.once("SIGTERM", () => stopped.abort());
  // Said once the feed is open, not before: a server lost while it opened ended the watch with a timeout (exit
  // 1), after it had already said it was watching.
  const opened = () => {
    io.err(`watching task events${options.account ? ` of account ${options.account}` : ""}${from === "new" ? " (new ones)" : ` from sequence ${from}`}; Ctrl-C stops`);
    void sayConnectionChanges(nats, io);
  };
  for await (const { sequence, account, event } of subscribeTaskEvents(nats, { from, signal: stopped.signal, opened, ...(options.account ? { account: options.account } : {}) })) {
    io.out(`${sequence}\t${event.meta.at}\ttask ${event.meta.taskId}\t${account}\t${describe(event)}`);
  }
}
