import type { Server } from "node:net";
import { ConfigError } from "./config.ts";

/** The environment variables that set a listener's interface and port, named when either cannot be used. */
export interface ListenSettings {
  host: string;
  port: string;
}

/**
 * Binds `server`; resolves to the bound port (the one chosen when `port` is 0). A port in use, a port that needs
 * privileges, or a host that is not this machine's is a start-up error naming the setting to change, never a
 * stack trace: every listener reelay opens (the API, the admin API, metrics) refuses them the same way.
 */
export function listenOn(server: Server, options: { host: string; port: number; backlog?: number }, settings: ListenSettings): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => reject(listenRefusal(error, options, settings) ?? error));
    server.listen(options, () => {
      const address = server.address();
      resolve(typeof address === "object" && address ? address.port : options.port);
    });
  });
}

function listenRefusal(error: NodeJS.ErrnoException, { host, port }: { host: string; port: number }, settings: ListenSettings): ConfigError | undefined {
  switch (error.code) {
    case "EADDRINUSE":
      return new ConfigError(`port ${port} on ${host} is already in use (another reelay, or another program, listens there): stop it or set ${settings.port} to a free port`);
    case "EACCES":
      return new ConfigError(`port ${port} on ${host} needs privileges this process does not have (ports below 1024): set ${settings.port} to 1024 or above`);
    // A name that does not resolve, and an address no interface of this machine has.
    case "ENOTFOUND":
    case "EAI_AGAIN":
    case "EADDRNOTAVAIL":
      return new ConfigError(`${settings.host} ${JSON.stringify(host)} is not an address of this machine: set it to one (127.0.0.1: this machine only; 0.0.0.0: every interface)`);
    default:
      return undefined;
  }
}
