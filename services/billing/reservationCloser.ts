import type { MessagePort } from "node:worker_threads";
import type { AccountLedger, CloseOutcome } from "./accountLedger.ts";

/** What settlement needs of a ledger: closing a task's reservation (services/billing/settlement.ts). */
export type ReservationCloser = Pick<AccountLedger, "close">;

type CloseCommand = Parameters<ReservationCloser["close"]>[1];
interface CloseRequest {
  id: number;
  account: string;
  command: CloseCommand;
  openedAt: number;
}
type CloseReply = { id: number; outcome: CloseOutcome } | { id: number; error: string };

/*
 * Why settlement crosses threads: an account's money is one chain of guarded writes. Two ledgers in one
 * `reelay serve` (the edge's, opening tasks, and the projector thread's, closing them) each decide on the
 * account as they last read it, so each one's write made the other's next write lose its guard, read the
 * account again and try again: in the instant suite a fifth of creates and two in five settlement writes lost a race.
 * With the projector's closes sent to the edge's ledger, the process has one writer per account, whose queue
 * orders opens and closes and never races itself. Another process (a second edge, `serve projector` alone)
 * still races, and the guard still decides.
 */

/** Closes asked for by another thread's `BridgedCloser`, made with this thread's ledger. */
export function serveCloses(port: MessagePort, ledger: ReservationCloser): void {
  port.on("message", (request: CloseRequest) => {
    ledger.close(request.account, request.command, request.openedAt).then(
      (outcome) => port.postMessage({ id: request.id, outcome } satisfies CloseReply),
      (error: unknown) => port.postMessage({ id: request.id, error: error instanceof Error ? error.message : String(error) } satisfies CloseReply),
    );
  });
  // The thread's own work keeps it alive; a port left open must not keep it from ending.
  port.unref();
}

/**
 * A ledger on another thread (`serveCloses`), as settlement sees it. A close that fails there fails here with its
 * message (settlement tries it again); one whose answer never comes (the other thread gone) leaves its batch
 * unacknowledged, as a crash would.
 */
export class BridgedCloser implements ReservationCloser {
  private nextId = 0;
  private readonly waiting = new Map<number, { resolve(outcome: CloseOutcome): void; reject(error: Error): void }>();

  constructor(private readonly port: MessagePort) {
    port.on("message", (reply: CloseReply) => {
      const pending = this.waiting.get(reply.id);
      if (!pending) return;
      this.waiting.delete(reply.id);
      if ("error" in reply) pending.reject(new Error(`closing the reservation failed in the edge's ledger: ${reply.error}`));
      else pending.resolve(reply.outcome);
    });
    port.unref();
  }

  close(account: string, command: CloseCommand, openedAt: number): Promise<CloseOutcome> {
    return new Promise((resolve, reject) => {
      const id = ++this.nextId;
      this.waiting.set(id, { resolve, reject });
      this.port.postMessage({ id, account, command, openedAt } satisfies CloseRequest);
    });
  }
}
