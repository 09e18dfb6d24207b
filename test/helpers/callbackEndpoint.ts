import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A webhook receiver on loopback: answers every request with `status` after `delayMs`, noting when each came. */
export interface CallbackEndpoint {
  url: string;
  /** Date.now() of each request's arrival, in order. */
  arrivals: number[];
  stop(): Promise<void>;
}

export async function callbackEndpoint({ status = 204, delayMs = 0 }: { status?: number; delayMs?: number } = {}): Promise<CallbackEndpoint> {
  const arrivals: number[] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      arrivals.push(Date.now());
      const answer = () => res.writeHead(status).end();
      if (delayMs > 0) setTimeout(answer, delayMs);
      else answer();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hook`, arrivals, stop: () => new Promise((resolve) => server.close(() => resolve())) };
}
