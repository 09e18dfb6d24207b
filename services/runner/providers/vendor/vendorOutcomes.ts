import type { ProviderStatus } from "../types.ts";

/**
 * How a vendor's unsuccessful ends read to customers, the same for every vendor (vendors doc, section F):
 * the customer learns what happened and that it cost nothing; the vendor's code and ids go to `detail`,
 * which only operators see.
 */
type Failed = Extract<ProviderStatus, { state: "failed" }>;

const NO_CHARGE = "no charge was made";

/** The vendor's own words, short and on one line: some carry request ids or long traces. */
const readable = (message: string): string => message.replace(/\s+/g, " ").trim().slice(0, 300);

export const failedUpstream = (vendorMessage: string | undefined, detail: string): Failed => {
  const message = vendorMessage ? readable(vendorMessage) : "";
  return { state: "failed", reason: message ? `video generation failed upstream: ${message}; ${NO_CHARGE}` : `video generation failed upstream; ${NO_CHARGE}`, detail };
};

export const moderated = (detail: string): Failed => ({ state: "failed", reason: `the generated video was blocked by the upstream's content policy; ${NO_CHARGE}`, detail });

export const finishedWithoutVideo = (detail: string): Failed => ({ state: "failed", reason: `the upstream generator finished without a video; ${NO_CHARGE}`, detail });

export const expiredUpstream = (detail: string): Failed => ({ state: "failed", reason: `the upstream generator did not finish the video in its time limit (expired); ${NO_CHARGE}`, detail });

export const cancelledUpstream = (detail: string): Failed => ({ state: "failed", reason: `the task was cancelled at the upstream generator; ${NO_CHARGE}`, detail });

export const lostUpstream = (detail: string): Failed => ({ state: "failed", reason: `the upstream generator no longer knows this task; ${NO_CHARGE}`, detail });

/** A status the vendor's documentation does not list: it never ends a task (logged, asked again). */
export interface UnknownStatus {
  state: "unknown";
  status: string;
}

/** Vendor statuses are matched trimmed and case-insensitively (MiniMax's callbacks and docs disagree on case). */
export const normalStatus = (status: string): string => status.trim().toLowerCase();
