import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ledgerEventsOf } from "../contracts/ledger.ts";
import { TaskEvent } from "../contracts/videoTask.ts";

/**
 * Events stay in the streams for good: every version ever written must still be readable. Each file in
 * test/fixtures/events holds stored messages as one schema version wrote them (a ledger message may hold
 * a group of events); a change that can't read them needs an upcaster, never an edit of the fixtures.
 */
const FIXTURES = new URL("./fixtures/events/", import.meta.url);
const readers = { task: (raw: unknown) => [TaskEvent.parse(raw)], ledger: ledgerEventsOf } as const;

describe("stored events of every version", () => {
  const files = readdirSync(FIXTURES).filter((name) => name.endsWith(".json"));
  it("are all here", () => expect(files.sort()).toEqual(["ledger-events.v1.json", "ledger-group-messages.v1.json", "task-events.v1.json"]));

  for (const file of files) {
    it(`${file} parses with today's schemas`, () => {
      const kind = file.split("-")[0] as keyof typeof readers;
      const messages = JSON.parse(readFileSync(new URL(file, FIXTURES), "utf8")) as unknown[];
      for (const message of messages) expect(readers[kind](message).length).toBeGreaterThan(0);
    });
  }
});
