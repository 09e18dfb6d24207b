import { describe, expect, it } from "vitest";
import * as xstate from "xstate";

const packageFile = (path: string): string => new URL(`../node_modules/${path}`, import.meta.url).href;

describe("tests load the packages' builds reelay ships (test/shippedPackageBuilds.ts)", () => {
  it("starts the workers without the development condition", () => {
    expect(process.execArgv).not.toContain("development");
    expect(process.execArgv.filter((flag) => flag.startsWith("--conditions="))).toEqual([]);
  });

  // Its CommonJS build through the ES module wrapper (the bundle takes the ES build: built from the same source).
  it("loads xstate's production build, not its development build", async () => {
    const production = (await import(packageFile("xstate/dist/xstate.cjs.mjs"))) as typeof xstate;
    expect(xstate.createMachine).toBe(production.createMachine);
  });
});
