import { availableParallelism } from "node:os";
import { describe, expect, it } from "vitest";
import { serverProcs } from "../infra/natsServer.ts";

describe("the cores a nats-server reelay starts runs on (GOMAXPROCS)", () => {
  it("takes the operator's GOMAXPROCS as given", () => {
    expect(serverProcs({ GOMAXPROCS: "3" })).toBe("3");
  });

  it("is half the cores this process may use, at least one, when the operator sets none", () => {
    const expected = String(Math.max(1, Math.floor(availableParallelism() / 2)));
    expect(serverProcs({})).toBe(expected);
    expect(serverProcs({ GOMAXPROCS: " " })).toBe(expected);
  });
});
