import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { compiledTestTool } from "./helpers/childService.ts";

const PROBE = compiledTestTool("test/probes/renderShortOfFilesProbe.ts");

describe("a local render while the process can open no more files", () => {
  it("waits and renders once files are free again, instead of failing its task for good (EMFILE: 'rendering failed')", async () => {
    // A child process under a limit of 64 open files, every one of them held while the render is asked for.
    const { stdout } = await promisify(execFile)("prlimit", ["--nofile=64:64", process.execPath, PROBE], { timeout: 45_000 });
    const result = JSON.parse(stdout) as { held: number; whileShort: string[]; last: { state: string; reason?: string; detail?: string } };
    expect(result.held).toBeGreaterThan(0);
    expect(result.whileShort).not.toContain("failed");
    expect(result.last.state, JSON.stringify(result.last)).toBe("succeeded");
  });
});
