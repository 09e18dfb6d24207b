import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KvMirror, type KvMirrorOptions } from "../services/shared/kvMirror.ts";
import { silentLog } from "./helpers/testApp.ts";
import { startTestNats } from "./helpers/testNats.ts";

describe("a KV mirror", () => {
  let server: Awaited<ReturnType<typeof startTestNats>>;
  let nc: NatsConnection;
  let bucket: KV;
  let jsm: JetStreamManager;
  beforeAll(async () => {
    server = await startTestNats();
    nc = await connect({ servers: server.url });
    jsm = await jetstreamManager(nc);
    bucket = await new Kvm(nc).create("mirror_test");
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  const mirrorOf = (copy: Map<string, number>, extra: Partial<KvMirrorOptions<number>> = {}) =>
    new KvMirror<number>(
      bucket,
      {
        ...extra,
        name: "numbers",
        decode: (entry) => {
          const value: unknown = entry.json();
          if (typeof value !== "number") throw new Error(`not a number: ${entry.string()}`);
          return value;
        },
        onPut: (key, value) => copy.set(key, value),
        onDelete: (key) => copy.delete(key),
        log: silentLog,
      },
    );

  it("skips a malformed record and keeps applying the changes behind it", async () => {
    const copy = new Map<string, number>();
    const mirror = mirrorOf(copy);
    await mirror.start();
    await bucket.put("a", "1");
    await bucket.put("broken", "{not json");
    await bucket.put("b", "2");
    await bucket.delete("a");
    await expect.poll(() => [...copy.entries()]).toEqual([["b", 2]]);
    expect(mirror.healthy).toBe(true);
    mirror.stop();
  });

  it("when its consumer is lost under it, then it opens a new one within 2 s and applies the changes made meanwhile, in order", async () => {
    const copy = new Map<string, number>();
    const mirror = mirrorOf(copy);
    await mirror.start();
    await expect.poll(() => mirror.healthy).toBe(true);
    await bucket.put("d", "4");
    await expect.poll(() => copy.get("d")).toBe(4);
    const names: string[] = [];
    for await (const info of jsm.consumers.list("KV_mirror_test")) names.push(info.name);
    for (const name of names) await jsm.consumers.delete("KV_mirror_test", name);
    await bucket.put("d", "5");
    await bucket.put("e", "6");
    await bucket.delete("d");
    await expect.poll(() => [copy.get("d"), copy.get("e")], { timeout: 2_000 }).toEqual([undefined, 6]);
    expect(mirror.healthy).toBe(true);
    mirror.stop();
  });

  it("with updates only, then it starts at the bucket's end", async () => {
    await bucket.put("f", "7");
    const copy = new Map<string, number>();
    const mirror = mirrorOf(copy, { updatesOnly: true });
    await mirror.start();
    await bucket.put("g", "8");
    await expect.poll(() => copy.get("g")).toBe(8);
    expect(copy.has("f")).toBe(false);
    mirror.stop();
  });
});
