import type { VendorSettings } from "../../../../contracts/config.ts";
import { upstreamCallbackPath } from "../../../../contracts/runnerControl.ts";

/** Where a vendor calls this reelay back about a channel's tasks, when the entry names a public address. */
export const callbackUrlOf = (settings: Pick<Extract<VendorSettings, { kind: "ark" | "kling" | "minimax" }>, "publicCallbackUrl">, channel: string): string | undefined =>
  settings.publicCallbackUrl ? `${settings.publicCallbackUrl.replace(/\/+$/, "")}${upstreamCallbackPath(channel)}` : undefined;
