import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import type { LedgerCommand } from "../services/billing/account.ts";
import { emptyAccount } from "../services/billing/accountFold.ts";
import { InsufficientBalanceError } from "../services/billing/account.ts";
import { LedgerChatUsageMeter } from "../services/billing/chatUsageMeter.ts";
import { registry } from "../services/shared/metrics/metrics.ts";

const CHARGE = {
  account: "acme",
  model: "priced-gpt",
  requestId: "req_1",
  inputPricePerMillionTokens: 2,
  outputPricePerMillionTokens: 8,
  promptTokens: 7,
  completionTokens: 6,
  counted: false,
};

const unwritten = async () => (await registry.getSingleMetric("reelay_chat_charges_unwritten_total")?.get())?.values[0]?.value ?? 0;

/** A ledger whose writes fail `failures` times (as a write nobody answered does), then land; it keeps every command. */
function flakyLedger(failures: number) {
  const commands: LedgerCommand[] = [];
  let left = failures;
  return {
    commands,
    execute: async (_account: string, command: LedgerCommand) => {
      commands.push(command);
      if (left-- > 0) throw new Error("TIMEOUT");
      return emptyAccount("acme");
    },
    current: async () => emptyAccount("acme"),
  };
}

describe("a chat's charge is written until it lands", () => {
  it("given writes that fail twice, when charged, then it is written a third time, the same command each time (one msgID: a try that landed counts once)", async () => {
    const ledger = flakyLedger(2);
    await new LedgerChatUsageMeter(ledger, { get: () => undefined }, 60_000).charge(CHARGE);
    expect(ledger.commands).toHaveLength(3);
    expect(new Set(ledger.commands.map((command) => JSON.stringify(command))).size).toBe(1);
    expect(ledger.commands[0]).toMatchObject({ type: "chargeChat", requestId: "req_1", costMicros: 62 });
  });

  it("given a charge waiting to be written again, when the edge stops, then it gets one more try at once, and stop waits for it", async () => {
    const unwrittenBefore = await unwritten();
    const ledger = flakyLedger(Number.POSITIVE_INFINITY);
    const meter = new LedgerChatUsageMeter(ledger, { get: () => undefined }, 60_000);
    const charged = meter.charge(CHARGE);
    const outcome = charged.then(() => "written", () => "given up");
    // The first try failed, and the charge waits for its next one (250 ms later).
    await sleep(20);
    expect(ledger.commands).toHaveLength(1);
    const stoppedAt = performance.now();
    await meter.stop();
    expect(await outcome).toBe("given up");
    expect(ledger.commands).toHaveLength(2);
    // Not the next pause's 250 ms: the try is made at once.
    expect(performance.now() - stoppedAt).toBeLessThan(200);
    // Given up: counted for the operators' alerts (reelay_chat_charges_unwritten_total).
    expect((await unwritten()) - unwrittenBefore).toBe(1);
  });

  it("given a hold whose write got no answer (it may land later), when the request is refused, then an empty charge closes it; a hold refused for money writes nothing more", async () => {
    const HOLD = { ...CHARGE, requestId: "req_2", promptTokens: 7, maxCompletionTokens: 64 };
    const unanswered = flakyLedger(1);
    const meter = new LedgerChatUsageMeter(unanswered, { get: () => undefined }, 60_000);
    await expect(meter.reserve(HOLD)).rejects.toThrow("TIMEOUT");
    await meter.stop();
    expect(unanswered.commands.map((command) => command.type)).toEqual(["reserveChat", "chargeChat"]);
    expect(unanswered.commands[1]).toMatchObject({ requestId: "req_2", promptTokens: 0, completionTokens: 0, costMicros: 0, counted: true });

    const commands: LedgerCommand[] = [];
    const broke = {
      execute: async (_account: string, command: LedgerCommand) => {
        commands.push(command);
        throw new InsufficientBalanceError("insufficient balance");
      },
      current: async () => emptyAccount("acme"),
    };
    await expect(new LedgerChatUsageMeter(broke, { get: () => undefined }, 60_000).reserve(HOLD)).rejects.toBeInstanceOf(InsufficientBalanceError);
    expect(commands.map((command) => command.type)).toEqual(["reserveChat"]);
  });

  it("a free model's charge writes nothing", async () => {
    const ledger = flakyLedger(0);
    await new LedgerChatUsageMeter(ledger, { get: () => undefined }, 60_000).charge({ ...CHARGE, inputPricePerMillionTokens: 0, outputPricePerMillionTokens: 0 });
    expect(ledger.commands).toHaveLength(0);
  });
});
