import { connect as tcpConnect, isIP, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { UpstreamError } from "../../../../shared/errors.ts";
import { ChunkedDecoder, ProtocolError } from "./chunkedDecoder.ts";

/**
 * A small HTTP/1.1 client for exactly one job: POST a JSON body to an upstream over a pooled keep-alive
 * connection and hand the response body back one socket read at a time.
 *
 * Why not node:http or fetch: the relay's cost is per request and per chunk. node:http builds a
 * ClientRequest, an IncomingMessage stream and one 'data' event per HTTP chunk; this client writes a
 * prebuilt head in one syscall, decodes chunked framing in place and delivers every payload byte of a
 * socket read as one buffer, so the relay makes one client write per upstream read. pause()/resume()
 * act on the socket itself, which is our backpressure all the way to the upstream's TCP window.
 */

export interface UpstreamTarget {
  secure: boolean;
  /** Host name or IP address to connect to (IPv6 without brackets). */
  host: string;
  port: number;
  path: string;
  /** The Host header value. */
  authority: string;
}

/** The target for an http(s) URL. */
export function targetOf(url: URL): UpstreamTarget {
  const secure = url.protocol === "https:";
  return {
    secure,
    host: url.hostname.replace(/^\[(.*)\]$/, "$1"),
    port: Number(url.port) || (secure ? 443 : 80),
    path: `${url.pathname}${url.search}`,
    authority: url.host,
  };
}

export interface ResponseHandlers {
  /** Status and headers (names lowercased); 1xx interim responses are skipped. */
  onHead(status: number, headers: ReadonlyMap<string, string>): void;
  /** Body bytes of one socket read. */
  onData(payload: Buffer): void;
  onEnd(): void;
  /** The exchange failed before its end (connection refused, reset, malformed response). Not called after cancel(). */
  onError(error: Error): void;
}

const MAX_HEAD_BYTES = 64 * 1024;
const MAX_IDLE_PER_ORIGIN = 512;
const HEAD_END = Buffer.from("\r\n\r\n");

/** Idle keep-alive connections per origin, most recently used last (LIFO keeps warm sockets warm). */
const idle = new Map<string, Connection[]>();
const originOf = (t: UpstreamTarget) => `${t.secure ? "https" : "http"}://${t.host}:${t.port}`;

class Connection {
  exchange: Exchange | undefined;
  readonly socket: Socket;
  lastError: (Error & { code?: string }) | undefined;

  constructor(readonly origin: string, target: UpstreamTarget) {
    this.socket = target.secure
      ? tlsConnect({ host: target.host, port: target.port, ALPNProtocols: ["http/1.1"], ...(isIP(target.host) ? {} : { servername: target.host }) })
      : tcpConnect({ host: target.host, port: target.port });
    this.socket.setNoDelay(true);
    this.socket.setKeepAlive(true, 30_000);
    // Listeners are attached once and dispatch to the current exchange: no per-request listener churn.
    this.socket.on("data", (data: Buffer) => (this.exchange ? this.exchange.received(data) : this.socket.destroy()));
    this.socket.on("error", (error) => (this.lastError = error)); // 'close' follows and carries the outcome
    this.socket.on("close", () => {
      this.removeFromPool();
      this.exchange?.closed();
    });
  }

  release(): void {
    this.exchange = undefined;
    // The last exchange may have paused it for a slow client just as its response ended.
    this.socket.resume();
    const pool = idle.get(this.origin) ?? [];
    if (pool.length >= MAX_IDLE_PER_ORIGIN || this.socket.destroyed) return void this.socket.destroy();
    // An idle pooled socket must not keep a stopping process alive.
    this.socket.unref();
    pool.push(this);
    idle.set(this.origin, pool);
  }

  private removeFromPool(): void {
    const pool = idle.get(this.origin);
    const at = pool?.indexOf(this) ?? -1;
    if (pool && at >= 0) pool.splice(at, 1);
  }
}

function takeIdle(origin: string): Connection | undefined {
  const pool = idle.get(origin);
  for (let connection = pool?.pop(); connection; connection = pool?.pop()) {
    if (!connection.socket.destroyed) return connection;
  }
  return undefined;
}

type Framing = { kind: "chunked"; decoder: ChunkedDecoder } | { kind: "length"; remaining: number } | { kind: "close" };

/** One request/response on one connection. */
class Exchange {
  private head: Buffer | undefined;
  private framing: Framing | undefined;
  private keepAlive = true;
  private gotBytes = false;
  finished = false;
  private readonly payload: Buffer[] = [];

  constructor(
    private readonly connection: Connection,
    private readonly handlers: ResponseHandlers,
    private readonly onStale: (() => void) | undefined,
  ) {}

  received(data: Buffer): void {
    this.gotBytes = true;
    try {
      let body: Buffer | undefined = data;
      if (!this.framing) body = this.readHead(data);
      if (body && body.length > 0 && this.framing) this.readBody(body);
    } catch (error) {
      this.fail(error instanceof ProtocolError ? new UpstreamError(`the upstream answered malformed HTTP: ${error.message}`) : (error as Error));
    }
  }

  closed(): void {
    if (this.finished) return;
    if (this.framing?.kind === "close") return this.end(false);
    // A pooled socket the upstream had closed while idle: nothing reached it, so sending again is safe.
    if (!this.gotBytes && this.onStale) {
      this.finished = true;
      return this.onStale();
    }
    const cause = this.connection.lastError?.code ?? this.connection.lastError?.message;
    const what = this.framing ? "the upstream broke off its response" : this.gotBytes ? "the upstream closed the connection mid-answer" : "cannot reach the upstream";
    this.fail(new UpstreamError(cause ? `${what}: ${cause}` : what));
  }

  cancel(): void {
    if (this.finished) return;
    this.finished = true;
    this.connection.socket.destroy();
  }

  private readHead(data: Buffer): Buffer | undefined {
    let buffer = this.head ? Buffer.concat([this.head, data]) : data;
    for (;;) {
      const end = buffer.indexOf(HEAD_END);
      if (end < 0) {
        if (buffer.length > MAX_HEAD_BYTES) throw new ProtocolError("response head too large");
        this.head = buffer;
        return undefined;
      }
      this.head = undefined;
      const lines = buffer.subarray(0, end).toString("latin1").split("\r\n");
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? "")?.[1]);
      if (!Number.isInteger(status)) throw new ProtocolError(`bad status line "${(lines[0] ?? "").slice(0, 40)}"`);
      buffer = buffer.subarray(end + 4);
      if (status < 200) continue; // 100 Continue / 103 Early Hints: the real answer follows
      const headers = new Map<string, string>();
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(":");
        if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
      }
      this.keepAlive = !/\bclose\b/i.test(headers.get("connection") ?? "") && lines[0]?.startsWith("HTTP/1.1") === true;
      const length = headers.get("content-length");
      if (/chunked/i.test(headers.get("transfer-encoding") ?? "")) this.framing = { kind: "chunked", decoder: new ChunkedDecoder() };
      else if (length !== undefined && /^\d+$/.test(length)) this.framing = { kind: "length", remaining: Number(length) };
      else if (status === 204 || status === 304) this.framing = { kind: "length", remaining: 0 };
      else this.framing = { kind: "close" };
      this.handlers.onHead(status, headers);
      if (this.finished) return undefined;
      if (this.framing.kind === "length" && this.framing.remaining === 0) this.end(buffer.length === 0);
      return buffer;
    }
  }

  private readBody(body: Buffer): void {
    const framing = this.framing;
    if (this.finished || !framing) return;
    if (framing.kind === "close") return this.handlers.onData(body);
    if (framing.kind === "length") {
      const take = Math.min(framing.remaining, body.length);
      framing.remaining -= take;
      if (take > 0) this.handlers.onData(take === body.length ? body : body.subarray(0, take));
      if (framing.remaining === 0 && !this.finished) this.end(take === body.length);
      return;
    }
    const payload = this.payload;
    const endAt = framing.decoder.push(body, (slice) => payload.push(slice));
    // Every payload byte of this read in one buffer: one relay step and one client write per read.
    if (payload.length > 0) {
      const merged = payload.length === 1 ? (payload[0] as Buffer) : Buffer.concat(payload);
      payload.length = 0;
      this.handlers.onData(merged);
    }
    if (endAt >= 0 && !this.finished) this.end(endAt === body.length);
  }

  /** `reusable`: no stray bytes followed the response, so the connection may serve the next request. */
  private end(reusable: boolean): void {
    this.finished = true;
    if (reusable && this.keepAlive && this.framing?.kind !== "close") this.connection.release();
    else this.connection.socket.destroy();
    this.handlers.onEnd();
  }

  private fail(error: Error): void {
    if (this.finished) return;
    this.finished = true;
    this.connection.socket.destroy();
    this.handlers.onError(error);
  }
}

/** A request in flight: cancel() at any time; pause()/resume() stop and restart reading the response. */
export interface UpstreamCall {
  cancel(): void;
  pause(): void;
  resume(): void;
}

/**
 * Sends a POST with `headers` (lines each ending in CRLF) and `body`; the request line, Host and
 * Content-Length are added here. A reused idle connection that turns out to be closed is replaced once, transparently.
 */
export function post(target: UpstreamTarget, headers: string, body: Buffer, handlers: ResponseHandlers): UpstreamCall {
  const origin = originOf(target);
  const request = Buffer.from(`POST ${target.path} HTTP/1.1\r\nhost: ${target.authority}\r\n${headers}content-length: ${body.length}\r\n\r\n`, "latin1");
  let exchange: Exchange | undefined;
  let connection: Connection | undefined;
  let cancelled = false;
  const start = (allowReuse: boolean) => {
    const reused = allowReuse ? takeIdle(origin) : undefined;
    connection = reused ?? new Connection(origin, target);
    connection.socket.ref();
    exchange = new Exchange(connection, handlers, reused ? () => !cancelled && start(false) : undefined);
    connection.exchange = exchange;
    connection.socket.cork();
    connection.socket.write(request);
    connection.socket.write(body);
    connection.socket.uncork();
  };
  start(true);
  return {
    cancel: () => {
      cancelled = true;
      exchange?.cancel();
    },
    // Only while this exchange owns the connection: once released it may be serving someone else.
    pause: () => {
      if (exchange && !exchange.finished) connection?.socket.pause();
    },
    resume: () => {
      if (exchange && !exchange.finished) connection?.socket.resume();
    },
  };
}
