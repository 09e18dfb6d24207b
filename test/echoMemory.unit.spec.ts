import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { compiledTestTool } from "./helpers/childService.ts";

const PROBE = compiledTestTool("test/probes/echoMemoryProbe.ts");
const MiB = 1024 * 1024;

describe("the echo model under large messages", () => {
  it("streams four concurrent 1 MiB answers in little memory, honouring backpressure", async () => {
    // A child process with a heap limit: the old echo built every event up front (about 220 MiB per
    // 1 MiB message), which dies here instead of passing slowly.
    const { stdout } = await promisify(execFile)(process.execPath, ["--expose-gc", "--max-old-space-size=256", PROBE, "4"], {
      maxBuffer: MiB,
    });
    const result = JSON.parse(stdout) as { peakHeapGrowth: number; bytes: number[]; words: number[] };
    expect(result.words).toEqual([524_288, 524_288, 524_288, 524_288]);
    // The whole answer went out (content plus a bounded number of event envelopes).
    for (const bytes of result.bytes) {
      expect(bytes).toBeGreaterThan(MiB);
      expect(bytes).toBeLessThan(3 * MiB);
    }
    // Four 1 MiB messages are held as strings (~4–8 MiB); the stream itself adds little on top.
    expect(result.peakHeapGrowth).toBeLessThan(48 * MiB);
  });
});
