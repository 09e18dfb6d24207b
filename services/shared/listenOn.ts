import type { Server } from "node:net";
import { ConfigError } from "./config.ts";

/**
 * Binds `server`; resolves to the bound port (the one chosen when `port` is 0). A port in use is a start-up
 * error in the words `inUse` gives (which setting to change), never a stack trace: every listener reelay opens
 * (the API, the admin API, metrics) refuses a taken port the same way.
 */
export function listenOn(server: Server, options: { host: string; port: number; backlog?: number }, inUse: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", (error: NodeJS.ErrnoException) => reject(error.code === "EADDRINUSE" ? new ConfigError(inUse) : error));
    server.listen(options, () => {
      const address = server.address();
      resolve(typeof address === "object" && address ? address.port : options.port);
    });
  });
}
