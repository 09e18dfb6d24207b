import { setTimeout as sleep } from "node:timers/promises";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { handledTogether, type WrittenBehind } from "../services/shared/batchReactor.ts";

/** Work written behind that fails `afterMs` from now (a write given up while stopping, say). */
const failingLater = (afterMs: number): WrittenBehind => ({ durable: sleep(afterMs).then(() => Promise.reject(new Error("write given up"))) });
const keptLater = (afterMs: number): WrittenBehind => ({ durable: sleep(afterMs) });

describe("handledTogether: several reactors' work on one batch", () => {
  const unhandled: unknown[] = [];
  const note = (reason: unknown) => unhandled.push(reason);
  beforeEach(() => {
    unhandled.length = 0;
    process.on("unhandledRejection", note);
  });
  afterEach(() => void process.off("unhandledRejection", note));

  it("given one handler failing and another writing behind, when that write fails later, then the batch fails with the first and nothing goes unhandled (an unhandled rejection ended the process)", async () => {
    const together = handledTogether([Promise.resolve(failingLater(10)), Promise.reject(new Error("webhook job not queued")), Promise.resolve()]);
    await expect(together).rejects.toThrow("webhook job not queued");
    await sleep(50);
    expect(unhandled).toEqual([]);
  });

  it("given every handler done, then the batch is kept once all they write behind is, and fails if any of it fails", async () => {
    const kept = await handledTogether([Promise.resolve(keptLater(5)), Promise.resolve(), Promise.resolve(keptLater(10))]);
    await expect(kept.durable).resolves.toBeUndefined();
    const notKept = await handledTogether([Promise.resolve(keptLater(5)), Promise.resolve(failingLater(10)), Promise.resolve(failingLater(15))]);
    await expect(notKept.durable).rejects.toThrow("write given up");
    await sleep(30);
    expect(unhandled).toEqual([]);
  });
});
