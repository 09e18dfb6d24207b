import { describe, expect, it } from "vitest";
import { isAtLeast, parseServerVersion } from "../infra/natsServerVersion.ts";

describe("nats-server versions", () => {
  it("reads what the binary prints and what the server reports in INFO", () => {
    expect(parseServerVersion("nats-server: v2.15.1\n")?.text).toBe("2.15.1");
    expect(parseServerVersion("2.9.10")?.text).toBe("2.9.10");
    expect(parseServerVersion("2.12.0-beta.1")?.minor).toBe(12);
    expect(parseServerVersion("nats-server")).toBeUndefined();
  });

  it.each([
    ["2.9.10", false],
    ["2.10.29", false],
    ["2.11.9", false],
    ["2.12.0", true],
    ["2.15.1", true],
    ["3.0.0", true],
    ["1.99.99", false],
  ])("%s is supported: %s", (text, supported) => {
    const version = parseServerVersion(text);
    expect(version && isAtLeast(version)).toBe(supported);
  });
});
