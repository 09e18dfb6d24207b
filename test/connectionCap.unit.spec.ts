import { describe, expect, it } from "vitest";
import { connectionCap } from "../services/edge/connectionCap.ts";
import { openFileLimit } from "../services/shared/openFileLimit.ts";
import { silentLog } from "./helpers/testApp.ts";

const procLimits = (soft: string, hard: string) =>
  `Limit                     Soft Limit           Hard Limit           Units     \nMax processes             94235                94235                processes \nMax open files            ${soft}                ${hard}                files     \nMax locked memory         8388608              8388608              bytes     \n`;

describe("how many connections the edge holds at once", () => {
  it("reads the soft open-file limit from /proc/self/limits, and nothing from an unlimited or missing one", () => {
    expect(openFileLimit(procLimits("4096", "524288"))).toBe(4096);
    expect(openFileLimit(procLimits("unlimited", "unlimited"))).toBeUndefined();
    expect(openFileLimit("")).toBeUndefined();
    expect(openFileLimit("garbage")).toBeUndefined();
  });

  it("takes the configured cap, or three quarters of the open-file limit, or none when neither is known", () => {
    expect(connectionCap(500, 4096, silentLog)).toBe(500);
    expect(connectionCap(0, 4096, silentLog)).toBe(3072);
    expect(connectionCap(0, 1_048_576, silentLog)).toBe(786_432);
    expect(connectionCap(0, undefined, silentLog)).toBeUndefined();
  });
});
