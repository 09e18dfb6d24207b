import { describe, expect, it } from "vitest";
import { ProviderSettings } from "../contracts/config.ts";
import { LocalProvider } from "../services/runner/providers/local/localProvider.ts";
import { UpstreamLost } from "../services/runner/providers/types.ts";
import { sampleJob } from "./helpers/fixtures.ts";
import { silentLog } from "./helpers/testApp.ts";

describe("the local provider asked about a render it does not have", () => {
  it("answers UpstreamLost and starts nothing: another runner may be rendering it; the live task machine decides", async () => {
    const settings = ProviderSettings.parse({ kind: "local", queueDelayMs: 60_000 });
    if (settings.kind !== "local") throw new Error("not a local provider entry");
    const provider = new LocalProvider(settings, { ffmpegPath: "/nonexistent/ffmpeg", log: silentLog });
    const accepted = { taskId: 9, job: sampleJob, clientReference: "reelay-task-9", providerTaskId: "local-9-x", signal: new AbortController().signal };

    await expect(provider.status(accepted)).rejects.toBeInstanceOf(UpstreamLost);
    await expect(provider.status(accepted)).rejects.toBeInstanceOf(UpstreamLost);

    // Started again only when asked to: then it is known (queued behind the queue delay).
    await provider.restart(accepted);
    expect(await provider.status(accepted)).toEqual({ state: "queued" });
    await provider.close();
  });

  it("drops a render no runner asked about for its orphan time (its task moved to another runner), and keeps one that is asked about", async () => {
    const settings = ProviderSettings.parse({ kind: "local", queueDelayMs: 60_000 });
    if (settings.kind !== "local") throw new Error("not a local provider entry");
    const provider = new LocalProvider(settings, { ffmpegPath: "/nonexistent/ffmpeg", log: silentLog, orphanAfterMs: 1000 });
    const task = (taskId: number) => ({ taskId, job: sampleJob, clientReference: `reelay-task-${taskId}`, signal: new AbortController().signal });
    const asked = { ...task(1), ...(await provider.submit(task(1))) };
    const orphan = { ...task(2), ...(await provider.submit(task(2))) };
    // Asked every 100 ms for twice the orphan time (a loaded machine's loop may stall some of that).
    for (let i = 0; i < 20; i++) {
      expect(await provider.status(asked)).toEqual({ state: "queued" });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await expect(provider.status(orphan)).rejects.toBeInstanceOf(UpstreamLost);
    expect(await provider.status(asked)).toEqual({ state: "queued" });
    await provider.close();
  });
});
