import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STREAMS } from "../infra/jetstreamLayout.ts";
import { newestTaskId, TASK_ID_BLOCK, TaskIdAllocator } from "../services/edge/video/taskIds.ts";
import { connectNats, type Nats } from "../services/shared/nats.ts";
import { startTestNats } from "./helpers/testNats.ts";

const layout = { replicas: 1, leaseMs: 2000 };

describe("task ids in blocks (counter TASK_ID_COUNTER)", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nats: Nats;
  beforeAll(async () => {
    server = await startTestNats();
    nats = await connectNats(server.url, "task-ids-test", layout);
  });
  afterAll(async () => {
    await nats?.nc.close();
    await server?.stop();
  });

  it("two edges taking ids at once never share one; each edge's ids grow; a block costs one counter write", async () => {
    const edges = [new TaskIdAllocator(nats.js), new TaskIdAllocator(nats.js)] as const;
    const writesBefore = (await nats.jsm.streams.info(STREAMS.taskIdCounter.name)).state.last_seq;
    const taken = await Promise.all(edges.map((edge) => Promise.all(Array.from({ length: 300 }, () => edge.take()))));
    const all = taken.flat();
    expect(new Set(all).size).toBe(600);
    for (const ids of taken) expect(ids).toEqual([...ids].sort((a, b) => a - b));
    const writes = (await nats.jsm.streams.info(STREAMS.taskIdCounter.name)).state.last_seq - writesBefore;
    expect(writes).toBe(2 * Math.ceil(300 / TASK_ID_BLOCK));
    expect(await newestTaskId(nats.jsm)).toBeGreaterThanOrEqual(Math.max(...all));
    expect(Math.min(...all)).toBeGreaterThan(0);
  });
});
