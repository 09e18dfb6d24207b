import { createRequire } from "node:module";
import type * as UwsModule from "uWebSockets.js";
import type { Logger } from "../../shared/log.ts";

export type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from "uWebSockets.js";
type Uws = typeof UwsModule;

/**
 * uWebSockets.js is not on npm from its authors; we ship two builds and take the first whose native
 * binary loads: `uWebSockets.js` (a fork with binaries for Node 16/18/20 on any glibc) and `uws-modern`
 * (binaries for Node 20–25, needs glibc ≥ 2.38). A build whose binary does not load either throws or —
 * worse — silently falls back to a slow JS server whose App is a `TemplatedApp`; neither is accepted.
 */
const BUILDS = ["uWebSockets.js", "uws-modern"] as const;

export interface UwsChoice {
  uws: Uws | undefined;
  build: string | undefined;
  /** Why each build was passed over (empty when the first one loaded). */
  rejected: string[];
}

export function chooseUwsBuild(load: (name: string) => unknown = createRequire(import.meta.url)): UwsChoice {
  const rejected: string[] = [];
  for (const name of BUILDS) {
    try {
      const candidate = load(name) as Uws;
      const implementation = candidate.App().constructor.name;
      if (implementation === "uWS.App") return { uws: candidate, build: name, rejected };
      rejected.push(`${name}: no native binary for Node ${process.version} (got its "${implementation}" JS fallback)`);
    } catch (error) {
      rejected.push(`${name}: ${(error as Error).message.split("\n")[0]}`);
    }
  }
  return { uws: undefined, build: undefined, rejected };
}

const choice = chooseUwsBuild();

/** The native uWS, or an error naming the fix. Called once at edge start; says in the log which build runs. */
export function nativeUws(log: Logger): Uws {
  if (choice.uws) {
    log.info({ build: choice.build, passedOver: choice.rejected }, "HTTP server: native uWebSockets.js");
    return choice.uws;
  }
  const message =
    `no native uWebSockets.js build loads on Node ${process.version} (${process.platform}/${process.arch}):\n  ` +
    `${choice.rejected.join("\n  ")}\n` +
    "Run reelay on Node 20 (any glibc), or on Node 22/24 with glibc 2.38 or newer (Debian 13, Ubuntu 24.04); see README 'Node versions'.";
  log.error({ passedOver: choice.rejected }, "no native uWebSockets.js build: refusing to start the edge on the slow JS fallback");
  throw new Error(message);
}
