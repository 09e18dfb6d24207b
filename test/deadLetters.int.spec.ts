import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deadLetterSubject, STREAMS } from "../infra/jetstreamLayout.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

describe("an event no projection can read", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ providers: () => new ScriptedVendor() });
  });
  afterAll(async () => {
    await app?.stop();
  });

  it("is parked on the dead-letter subject with its origin and error, and the projection moves on", async () => {
    const junk = await app.nats.js.publish("acct.junk.task.987654.state", JSON.stringify({ type: "TaskTeleported", data: {}, meta: { schema: 9 } }));
    const client = new VideoClient(app.baseUrl, await app.keyFor("after-junk"));
    const created = await client.create({ model: "VideoModel-2.0-mini", prompt: "after the junk", duration: 4 });
    // The task view projection got past the junk: the new task is readable.
    await expect.poll(async () => (await client.query(created.body.data?.task_id as number)).status, { timeout: 10_000 }).toBe(200);

    const parked = await app.nats.jsm.direct.getMessage(STREAMS.deadLetters.name, { last_by_subj: deadLetterSubject("task views") });
    expect(parked?.json()).toMatchObject({ type: "TaskTeleported" });
    expect(parked?.header.get("Reelay-Stream")).toBe(STREAMS.events.name);
    expect(parked?.header.get("Reelay-Sequence")).toBe(String(junk.seq));
    expect(parked?.header.get("Reelay-Error")).toMatch(/type/);
  });
});
