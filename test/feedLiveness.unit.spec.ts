import { describe, expect, it } from "vitest";
import { FEED_LAG_BOUND, FEED_SILENCE_MS, FeedLiveness } from "../services/shared/liveFeed.ts";

/** A feed's liveness on a clock the spec moves. */
function world() {
  let now = 1_000;
  const told: boolean[] = [];
  const liveness = new FeedLiveness((behind) => told.push(behind), () => now);
  return { liveness, told, advance: (ms: number) => (now += ms) };
}

describe("when a feed is behind (what /healthz answers 503 for)", () => {
  it("given a feed not opened yet, then it is behind", () => {
    expect(world().liveness.behindReason()).toBe("is not open");
  });

  it("given a feed opened with nothing waiting for it, then it is current at once", () => {
    const { liveness, told } = world();
    liveness.opened(0);
    expect(liveness.behindReason()).toBeUndefined();
    expect(told).toEqual([false]);
  });

  it("given a feed reopened with a backlog, then it is behind until a message leaves at most the bound waiting", () => {
    const { liveness } = world();
    liveness.opened(5_000);
    expect(liveness.behindReason()).toBe("is catching up (5000 events behind)");
    liveness.message(FEED_LAG_BOUND + 1);
    expect(liveness.behind).toBe(true);
    liveness.message(FEED_LAG_BOUND);
    expect(liveness.behindReason()).toBeUndefined();
  });

  it("given a feed reopened without knowing its backlog, then it is behind until its first message or heartbeat", () => {
    const { liveness } = world();
    liveness.opened();
    expect(liveness.behindReason()).toBe("was reopened and has not caught up yet");
    liveness.heartbeat(0);
    expect(liveness.behindReason()).toBeUndefined();
  });

  it("given a current feed, when neither a message nor a heartbeat comes for more than 2 s, then it is behind, and current again at the next sign", () => {
    const { liveness, advance } = world();
    liveness.opened(0);
    advance(FEED_SILENCE_MS);
    expect(liveness.behind).toBe(false);
    advance(1);
    expect(liveness.behindReason()).toBe("has been silent for 2.0 s");
    liveness.heartbeat(0);
    expect(liveness.behind).toBe(false);
  });

  it("given a heartbeat while the client still holds received events, then those count as waiting", () => {
    const { liveness } = world();
    liveness.opened(0);
    liveness.heartbeat(FEED_LAG_BOUND + 1);
    expect(liveness.behind).toBe(true);
  });

  it("given a current feed, when its consumer is lost, then it is behind until a new one runs, each change told once", () => {
    const { liveness, told } = world();
    liveness.opened(0);
    liveness.message(0);
    liveness.lost();
    expect(liveness.behindReason()).toBe("is not open");
    liveness.opened(0);
    expect(told).toEqual([false, true, false]);
  });
});
