import { describe, expect, it } from "vitest";
import { chooseUwsBuild } from "../services/edge/http/uws.ts";

class TemplatedApp {}
const fakeBuild = (appClass: new () => object) => ({ App: () => new appClass() });
const nativeApp = { ["uWS.App"]: class {} }["uWS.App"];

describe("choosing a uWebSockets.js build", () => {
  it("takes the first build whose native binary loads, here the real one", () => {
    const choice = chooseUwsBuild();
    expect(choice.build).toBe("uWebSockets.js");
    expect(choice.uws?.App().constructor.name).toBe("uWS.App");
  });

  it("passes over a build that fell back to JS and takes the next native one", () => {
    const modules: Record<string, unknown> = { "uWebSockets.js": fakeBuild(TemplatedApp), "uws-modern": fakeBuild(nativeApp) };
    const choice = chooseUwsBuild((name) => modules[name]);
    expect(choice.build).toBe("uws-modern");
    expect(choice.rejected).toEqual([expect.stringContaining('"TemplatedApp" JS fallback')]);
  });

  it("reports every reason when no build is native", () => {
    const choice = chooseUwsBuild((name) => {
      if (name === "uws-modern") throw new Error("GLIBC_2.38 not found\nmore");
      return fakeBuild(TemplatedApp);
    });
    expect(choice.uws).toBeUndefined();
    expect(choice.rejected).toEqual([expect.stringContaining("uWebSockets.js: no native binary"), "uws-modern: GLIBC_2.38 not found"]);
  });
});
