import type { KV } from "@nats-io/kv";
import type { Logger } from "../shared/log.ts";
import { AccountBalance } from "../../contracts/ledger.ts";

type Balance = AccountBalance;

/**
 * The `balances` read model mirrored in memory by a KV watch, for checks on a hot path (may this account
 * spend on chat?) that must not wait for NATS. It lags the ledger by the projector's delay: good for a
 * gate, never for a reservation (those go through the ledger's fence).
 */
export class BalanceMirror {
  private readonly byAccount = new Map<string, Balance>();
  private stopWatching: (() => void) | undefined;

  constructor(private readonly bucket: KV, private readonly log: Logger) {}

  async start(): Promise<void> {
    const watch = await this.bucket.watch();
    this.stopWatching = () => watch.stop();
    (async () => {
      for await (const entry of watch) {
        if (entry.operation !== "PUT") this.byAccount.delete(entry.key);
        else this.byAccount.set(entry.key, AccountBalance.parse(entry.json()));
      }
    })().catch((error: unknown) => this.log.error({ err: error }, "balances watch ended"));
  }

  stop(): void {
    this.stopWatching?.();
  }

  get(account: string): Balance | undefined {
    return this.byAccount.get(account);
  }
}
