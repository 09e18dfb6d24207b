import http, { type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders } from "node:http";
import https from "node:https";
import { UpstreamError } from "../../../../shared/errors.ts";

/**
 * node:http rather than fetch: its response is a Node stream whose pause()/resume() stop and restart
 * socket reads directly (our backpressure), and it costs less CPU per chunk than WHATWG streams. One
 * keep-alive agent per protocol for the whole edge; LIFO keeps the warmest sockets in use. Idle pooled
 * sockets are unref'd by Node, so they never keep a stopping process alive.
 */
const agentOptions = { keepAlive: true, maxFreeSockets: 512, scheduling: "lifo" as const };
const agents = { http: new http.Agent(agentOptions), https: new https.Agent(agentOptions) };

interface NodeSystemError extends Error {
  code?: string;
}

/**
 * One POST to an upstream. `cancel` works at any time — before the answer, or while its body streams —
 * and the reason is what `send` rejects with.
 */
export class UpstreamExchange {
  private current: ClientRequest | undefined;
  private cancelledWith: Error | undefined;

  constructor(private readonly url: URL, private readonly headers: OutgoingHttpHeaders) {}

  /** Resolves once the response headers arrived. */
  send(body: Buffer): Promise<IncomingMessage> {
    return this.attempt(body, true);
  }

  cancel(reason: Error): void {
    if (this.cancelledWith) return;
    this.cancelledWith = reason;
    this.current?.destroy(reason);
  }

  private attempt(body: Buffer, mayRetry: boolean): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      if (this.cancelledWith) return reject(this.cancelledWith);
      const secure = this.url.protocol === "https:";
      const request = (secure ? https : http).request(this.url, {
        method: "POST",
        agent: secure ? agents.https : agents.http,
        headers: { ...this.headers, "content-length": body.length },
      });
      this.current = request;
      request.once("response", resolve);
      request.once("error", (error: NodeSystemError) => {
        if (this.cancelledWith) return reject(this.cancelledWith);
        // The upstream closed an idle keep-alive socket just as we reused it: nothing reached it, so
        // sending again cannot duplicate work.
        if (mayRetry && request.reusedSocket && error.code === "ECONNRESET") return resolve(this.attempt(body, false));
        reject(new UpstreamError(`cannot reach the upstream: ${error.code ?? error.message}`));
      });
      request.end(body);
    });
  }
}

/** Reads a whole body, refusing more than `maxBytes` (an upstream is trusted, but not with our memory). */
export function readAll(response: IncomingMessage, maxBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    response.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        response.destroy();
        reject(new UpstreamError(`upstream response exceeds ${maxBytes} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    response.once("end", () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size)));
    response.once("error", (error) => reject(new UpstreamError(`upstream response broke off: ${error.message}`)));
    response.once("close", () => {
      if (!response.complete) reject(new UpstreamError("upstream response broke off"));
    });
  });
}
