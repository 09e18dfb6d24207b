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
  beforeAll(async () => {
    server = await startTestNats();
    nc = await connect({ servers: server.url });
    bucket = await new Kvm(nc).create("mirror_test");
  });
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  const mirrorOf = (copy: Map<string, number>, openWatch?: ConstructorParameters<typeof KvMirror<number>>[2]) =>
    new KvMirror<number>(
      bucket,
      {
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
      openWatch,
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

  it("restarts a watch that ended, and is unhealthy until it has", async () => {
    const copy = new Map<string, number>();
    let opened = 0;
    let firstWatch: { stop(): void } | undefined;
    const openWatch = async (kv: KV, options: KvMirrorOptions<number>) => {
      opened++;
      if (opened === 2) throw new Error("JetStream not available right now");
      const watch = await kv.watch(options.key === undefined ? {} : { key: options.key });
      firstWatch ??= watch;
      return watch;
    };
    const mirror = mirrorOf(copy, openWatch);
    await mirror.start();
    await expect.poll(() => mirror.healthy).toBe(true);
    firstWatch?.stop(); // the watch ends under the mirror (as when its consumer is lost)
    await expect.poll(() => mirror.healthy, { timeout: 2_000, interval: 5 }).toBe(false);
    await expect.poll(() => opened, { timeout: 5_000 }).toBe(3);
    await expect.poll(() => mirror.healthy).toBe(true);
    await bucket.put("c", "3");
    await expect.poll(() => copy.get("c")).toBe(3);
    mirror.stop();
  });
});
