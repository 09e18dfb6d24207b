import type { CliIo } from "./cliIo.ts";
import { AdminTokenStore } from "../shared/adminTokens.ts";
import { ValidationError } from "../shared/errors.ts";
import type { Nats } from "../shared/nats.ts";

const USAGE = "usage: reelay admin tokens create --name <name> | admin tokens list | admin tokens revoke <token-id or name>";

/** `reelay admin tokens …`: the new token is printed alone on the last line, so scripts can take `tail -n 1`. */
export async function adminCommand(nats: Nats, args: string[], options: { name: string | undefined }, io: CliIo): Promise<void> {
  const store = new AdminTokenStore(nats.adminTokens);
  const [noun, action, target] = args;
  if (noun !== "tokens") throw new ValidationError(USAGE);
  switch (action) {
    case "create": {
      if (!options.name) throw new ValidationError(`admin tokens create needs --name <name>\n${USAGE}`);
      const { token, tokenId } = await store.create(options.name);
      io.out(`created admin token ${tokenId} for ${options.name}; it is shown only now:\n${token}`);
      return;
    }
    case "list": {
      const tokens = await store.list();
      if (tokens.length === 0) io.out("no admin tokens");
      for (const token of tokens) io.out(`${token.tokenId}\t${token.name}\t${token.createdAt}`);
      return;
    }
    case "revoke": {
      if (!target) throw new ValidationError(`admin tokens revoke needs a token id or name\n${USAGE}`);
      const revoked = await store.revoke(target);
      io.out(`revoked admin token ${revoked.tokenId} of ${revoked.name}`);
      return;
    }
    default:
      throw new ValidationError(USAGE);
  }
}
