import type { CliIo } from "./cliIo.ts";
import { AccountLedger } from "../billing/accountLedger.ts";
import { ApiKeyStore } from "../shared/apiKeys.ts";
import { ValidationError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";

const USAGE = "usage: reelay keys create --account <name> | keys list [--account <name>] | keys revoke <key-id>";

/** `reelay keys …`: the new key is printed alone on the last line, so scripts can take `tail -n 1`. */
export async function keysCommand(nats: Nats, args: string[], option: (name: string) => string | undefined, io: CliIo): Promise<void> {
  const store = new ApiKeyStore(nats.apiKeys);
  const [action, target] = args;
  switch (action) {
    case "create": {
      const account = option("account");
      if (!account) throw new ValidationError(`keys create needs --account <name>\n${USAGE}`);
      const { key, keyId } = await store.create(account);
      // A key's account exists in the ledger too (balance 0 until credited).
      await new AccountLedger(nats).execute(account, { type: "open" });
      io.out(`created key ${keyId} for account ${account}; it is shown only now:\n${key}`);
      return;
    }
    case "list": {
      const keys = await store.list(option("account"));
      if (keys.length === 0) io.out("no keys");
      for (const key of keys) io.out(`${key.keyId}\t${key.account}\t${key.createdAt}`);
      return;
    }
    case "revoke": {
      if (!target) throw new ValidationError(`keys revoke needs a key id\n${USAGE}`);
      const revoked = await store.revoke(target);
      io.out(`revoked key ${revoked.keyId} of account ${revoked.account}`);
      return;
    }
    default:
      throw new ValidationError(USAGE);
  }
}
