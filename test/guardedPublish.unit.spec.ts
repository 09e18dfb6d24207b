import { JetStreamApiError, type JetStreamClient } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { ConcurrencyError } from "../services/shared/errors.ts";
import { guardedPublish } from "../services/shared/subjectLog.ts";

/** A JetStream client whose every publish is refused with `error`. */
const refusing = (error: Error) => ({ publish: () => Promise.reject(error) }) as unknown as JetStreamClient;
const publish = (js: JetStreamClient) => guardedPublish(js, "acct.a.money.ledger", "{}", { msgID: "m", expectedLastSequence: 3 });

describe("a guarded publish the server refuses", () => {
  it("given a stream of one replica answering 'wrong last sequence' (10071), then another writer got there first", async () => {
    await expect(publish(refusing(new JetStreamApiError({ code: 400, err_code: 10071, description: "wrong last sequence: 4" })))).rejects.toBeInstanceOf(ConcurrencyError);
  });

  it("given a replicated stream answering 'wrong last sequence' without a sequence (10164, a write in flight on the subject), then the same", async () => {
    await expect(publish(refusing(new JetStreamApiError({ code: 400, err_code: 10164, description: "wrong last sequence" })))).rejects.toBeInstanceOf(ConcurrencyError);
  });

  it("given any other refusal, then it is passed on as it is", async () => {
    const unavailable = new JetStreamApiError({ code: 503, err_code: 10163, description: "expected last sequence per subject temporarily unavailable" });
    await expect(publish(refusing(unavailable))).rejects.toBe(unavailable);
  });
});
