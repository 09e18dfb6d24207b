import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

interface ListAnswer {
  code: number;
  msg: string;
  data?: { tasks: Array<{ task_id: number; status: string }>; next_before: number | null };
}

/** GET /api/compat/videosTasks: an account's tasks, newest first, paged, filtered by status. */
describe("task list", () => {
  let app: TestApp;
  const vendor = new ScriptedVendor();
  const keys: Record<string, string> = {};
  const mine: number[] = [];
  let failed = 0;

  beforeAll(async () => {
    app = await startTestApp({ providers: () => vendor });
    for (const account of ["lister", "other"]) keys[account] = await app.keyFor(account, 100);
    const client = new VideoClient(app.baseUrl, keys.lister as string);
    for (let i = 0; i < 5; i++) {
      vendor.generation = i === 3 ? { kind: "fail", after: 1, reason: "blocked by moderation" } : { kind: "succeed", after: 1 };
      const id = (await client.create({ model: "VideoModel-2.0-mini", prompt: `task ${i}`, duration: 4 })).body.data?.task_id as number;
      mine.push(id);
      if (i === 3) failed = id;
      await client.waitForFinal(id, 10_000, 20);
    }
    await new VideoClient(app.baseUrl, keys.other as string).create({ model: "VideoModel-2.0-mini", prompt: "theirs", duration: 4 });
  });
  afterAll(async () => app?.stop());

  const list = async (account: string, query = ""): Promise<{ status: number; body: ListAnswer }> => {
    const response = await fetch(`${app.baseUrl}/api/compat/videosTasks${query}`, { headers: { authorization: `Bearer ${keys[account]}` } });
    return { status: response.status, body: (await response.json()) as ListAnswer };
  };

  it("pages newest first with next_before, each task as the query shows it; another account's tasks never appear", async () => {
    // The index is kept by a reactor: wait until it has every final status.
    await expect.poll(async () => (await list("lister", "?status=success")).body.data?.tasks.length, { timeout: 10_000 }).toBe(4);
    const first = await list("lister", "?limit=2");
    expect(first.body.data?.tasks.map((t) => t.task_id)).toEqual([mine[4], mine[3]]);
    expect(first.body.data?.next_before).toBe(mine[3]);
    const second = await list("lister", `?limit=2&before=${mine[3]}`);
    expect(second.body.data?.tasks.map((t) => t.task_id)).toEqual([mine[2], mine[1]]);
    const last = await list("lister", `?limit=2&before=${mine[1]}`);
    expect(last.body.data?.tasks.map((t) => t.task_id)).toEqual([mine[0]]);
    expect(last.body.data?.next_before).toBeNull();
    const query = await new VideoClient(app.baseUrl, keys.lister as string).query(mine[4] as number);
    expect(first.body.data?.tasks[0]).toEqual(query.body.data);
    expect((await list("other")).body.data?.tasks.every((t) => !mine.includes(t.task_id))).toBe(true);
  });

  it("filters by status; a failed task shows its reason", async () => {
    const failures = await list("lister", "?status=failed");
    expect(failures.body.data?.tasks).toEqual([{ task_id: failed, status: "failed", msg: "blocked by moderation" }]);
  });

  it("refuses bad parameters with 400 naming them", async () => {
    for (const [query, name] of [["?limit=0", "limit"], ["?limit=101", "limit"], ["?before=abc", "before"], ["?status=done", "status"]]) {
      const answer = await list("lister", query);
      expect(answer.status).toBe(400);
      expect(answer.body.msg).toContain(name);
    }
  });
});
