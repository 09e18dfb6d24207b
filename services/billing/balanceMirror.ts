import type { KV } from "@nats-io/kv";
import { KvMirror } from "../shared/kvMirror.ts";
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
  readonly mirror: KvMirror<Balance>;

  constructor(bucket: KV, log: Logger) {
    this.mirror = new KvMirror(bucket, {
      name: "balances",
      decode: (entry) => AccountBalance.parse(entry.json()),
      onPut: (account, balance) => this.byAccount.set(account, balance),
      onDelete: (account) => this.byAccount.delete(account),
      log,
    });
  }

  start(): Promise<void> {
    return this.mirror.start();
  }

  stop(): void {
    this.mirror.stop();
  }

  get(account: string): Balance | undefined {
    return this.byAccount.get(account);
  }
}
