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
});
