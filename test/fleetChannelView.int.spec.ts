import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { FleetChannels } from "../services/runner/policy/fleetChannels.ts";
import { natsPerSuite } from "./helpers/natsPerSuite.ts";
import { silentLog } from "./helpers/testApp.ts";

const LEASE_MS = 200;

describe("a runner's view of the fleet's channels", () => {
  const suite = natsPerSuite("fleet-view-test", LEASE_MS);

  it("lets other runners' waiting records go a lease after they stopped counting (the server's expiry tells no watcher: it kept them all, a record per runner start, account and channel)", async () => {
    const watcher = new FleetChannels(suite.nats.fleet, "watcher", LEASE_MS, silentLog, () => undefined);
    await watcher.start([]);
    const baseline = watcher.recordsInView;
    // Runners started and stopped one after another (a new name each time), each with accounts waiting.
    for (let start = 0; start < 5; start++) {
      const gone = new FleetChannels(suite.nats.fleet, `runner-${start}`, LEASE_MS, silentLog, () => undefined);
      for (let account = 0; account < 4; account++) await gone.setWaiting("ark-main", `acct-${account}`, { count: 1, since: Date.now(), servedAt: 0 });
    }
    await expect.poll(() => watcher.recordsInView).toBe(baseline + 20);
    expect(watcher.waitingElsewhere("ark-main")).toHaveLength(20);
    // Two leases later none counts; the next waiting record written on the channel prunes them from the view.
    await sleep(3 * LEASE_MS);
    expect(watcher.waitingElsewhere("ark-main")).toHaveLength(0);
    const live = new FleetChannels(suite.nats.fleet, "runner-live", LEASE_MS, silentLog, () => undefined);
    await live.setWaiting("ark-main", "acct-0", { count: 1, since: Date.now(), servedAt: 0 });
    await expect.poll(() => watcher.recordsInView).toBe(baseline + 1);
    expect(watcher.waitingElsewhere("ark-main").map((record) => record.runner)).toEqual(["runner-live"]);
    watcher.stop();
  });
});
