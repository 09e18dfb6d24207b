import { EventEmitter } from "node:events";
import { createServer, type Server } from "node:net";
import { describe, expect, it } from "vitest";
import { failureLine } from "../services/cli/natsCommands.ts";
import { ConfigError } from "../services/shared/config.ts";
import { listenOn } from "../services/shared/listenOn.ts";

const SETTINGS = { host: "HOST", port: "PORT" };

/** A server whose bind fails with `code`, as Node reports it (this suite runs as root, so EACCES cannot be had for real). */
function serverFailingWith(code: string): Server {
  const server = new EventEmitter() as EventEmitter & { listen(): void };
  server.listen = () => void queueMicrotask(() => server.emit("error", Object.assign(new Error(`listen ${code}`), { code })));
  return server as unknown as Server;
}

describe("listenOn: a listener that cannot bind says which setting to change", () => {
  it("given a host no interface of this machine has (TEST-NET-1), when it binds for real, then one line names HOST", async () => {
    const failure = await listenOn(createServer(), { host: "192.0.2.1", port: 0 }, SETTINGS).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ConfigError);
    expect(failureLine(failure)).toBe(`reelay: HOST "192.0.2.1" is not an address of this machine: set it to one (127.0.0.1: this machine only; 0.0.0.0: every interface)`);
  });

  it.each([
    ["ENOTFOUND", "a name that does not resolve", /^HOST "web" is not an address of this machine/],
    ["EAI_AGAIN", "a name the resolver could not answer for", /^HOST "web" is not an address of this machine/],
    ["EACCES", "a port that needs privileges", /^port 80 on web needs privileges this process does not have \(ports below 1024\): set PORT to 1024 or above$/],
    ["EADDRINUSE", "a port in use", /^port 80 on web is already in use .*set PORT to a free port$/],
  ])("given %s (%s), then a ConfigError naming the setting", async (code, _case, message) => {
    const failure = await listenOn(serverFailingWith(code), { host: "web", port: 80 }, SETTINGS).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ConfigError);
    expect((failure as Error).message).toMatch(message);
  });

  it("given any other failure, then Node's own error, unchanged", async () => {
    const failure = await listenOn(serverFailingWith("EMFILE"), { host: "web", port: 80 }, SETTINGS).catch((error: unknown) => error);
    expect(failure).not.toBeInstanceOf(ConfigError);
    expect(failure).toMatchObject({ code: "EMFILE" });
  });
});
