import type { CliIo } from "./cliIo.ts";
import { AccountName } from "../../contracts/apiKey.ts";
import { AccountLedger } from "../billing/accountLedger.ts";
import { ValidationError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";
import { readAttempts } from "../webhooks/webhookLog.ts";
import { WebhookSecrets } from "../webhooks/webhookSecrets.ts";

const USAGE = "usage: reelay webhooks secret --account <name> [--rotate | --drop-previous] | webhooks log --account <name>";

/**
 * `reelay webhooks secret`: the account's signing secret, alone on the last line (made on first use;
 * `--rotate` makes a new one, the old one signing beside it for a day; `--drop-previous` ends that day now,
 * for a leaked secret). `reelay webhooks log`: recent delivery attempts.
 */
export async function webhooksCommand(nats: Nats, args: string[], options: { account: string | undefined; rotate: boolean; dropPrevious: boolean }, io: CliIo): Promise<void> {
  const [action] = args;
  const { account } = options;
  if (!account) throw new ValidationError(`${action === undefined ? "webhooks" : `webhooks ${action}`} needs --account <name>\n${USAGE}`);
  const name = AccountName.safeParse(account);
  if (!name.success) throw new ValidationError(name.error.issues[0]?.message ?? "bad account name");
  switch (action) {
    case "secret": {
      // A secret made for a misspelt name would sign nothing, and the receiver would be set up with it.
      if (!(await new AccountLedger(nats).current(account)).exists) throw new ValidationError(`no account named ${account}`);
      const secrets = new WebhookSecrets(nats.webhookSecrets);
      if (options.rotate && options.dropPrevious) throw new ValidationError(`--rotate and --drop-previous do not go together\n${USAGE}`);
      if (options.dropPrevious) {
        const dropped = await secrets.dropPrevious(account);
        io.out(dropped ? `the previous webhook secret of account ${account} no longer signs (within a second on every dispatcher)` : `account ${account} has no previous webhook secret signing`);
        return;
      }
      const secret = options.rotate ? await secrets.rotate(account) : await secrets.secretOf(account);
      const note = options.rotate ? "new signing secret (the previous one also signs for 24 hours)" : "signing secret";
      io.out(`webhook ${note} of account ${account}:\n${secret}`);
      return;
    }
    case "log": {
      const attempts = await readAttempts(nats.js, nats.jsm, account);
      if (attempts.length === 0) io.out(`no webhook deliveries for account ${account}`);
      for (const a of attempts) {
        const result = a.status !== undefined ? `HTTP ${a.status}` : (a.error ?? "");
        io.out(`${a.at}\ttask ${a.taskId}\t${a.type}\tattempt ${a.attempt}\t${a.outcome}\t${result}\t${a.durationMs} ms\t${a.target}`);
      }
      return;
    }
    default:
      throw new ValidationError(USAGE);
  }
}
