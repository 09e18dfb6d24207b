import { Kvm } from "@nats-io/kv";
import { pino } from "pino";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { ProjectionRunner, type Projection } from "../services/shared/projection.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";

type Event = { key: string; step: number; last?: boolean };
const Doc = z.object({ steps: z.number().int(), done: z.boolean() });
type Doc = z.infer<typeof Doc>;
const done = (doc: Doc) => doc.done;

/** A document of steps, written once done (as a task view is once final). */
const projection = (settled: boolean): Projection<Event, Doc> => ({
  name: "steps",
  stream: "unused",
  subjects: [],
  decode: () => [],
  keyOf: (event) => event.key,
  startsDocument: (event) => event.step === 1,
  evolve: (doc, event) => ({ steps: (doc?.steps ?? 0) + 1, done: doc?.done === true || event.last === true }),
  docSchema: Doc,
  persists: done,
  ...(settled ? { settled: done } : {}),
});
const at = (key: string, step: number, last = false) => ({ event: { key, step, last }, seq: step });

describe("a projection's cache of the documents it writes (real nats-server)", () => {
  const suite = natsPerSuite("projection-cache-test", 2000);

  it("given a settled document written, then it is not kept: a later event reads it back from the bucket; an unsettled one is folded from memory", async () => {
    for (const settled of [true, false]) {
      const bucket = await new Kvm(suite.nats.js).create(`steps_${settled}`);
      const reads = vi.spyOn(bucket, "get");
      const runner = new ProjectionRunner(projection(settled), suite.nats, "unused", bucket, pino({ level: "silent" }));
      await runner.handleEvents([at("a", 1), at("a", 2, true)]);
      expect((await bucket.get("a"))?.json<Doc>()).toEqual({ steps: 2, done: true });
      reads.mockClear();
      await runner.handleEvents([at("a", 3)]);
      expect(reads).toHaveBeenCalledTimes(settled ? 1 : 0);
      expect((await bucket.get("a"))?.json<Doc>()).toEqual({ steps: 3, done: true });
    }
  });
});
