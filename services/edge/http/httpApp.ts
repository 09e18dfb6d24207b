import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { ConfigError } from "../../shared/config.ts";
import type { Counter } from "prom-client";
import { httpRequestDuration, httpRequests } from "../../shared/metrics/metrics.ts";
import { answered, MeteredResponse, meterAnswer, type RouteMeters } from "./answerMeter.ts";
import type { NodeHandler } from "./route.ts";

/** Request line and headers together; more is answered 431 (node:http counts both against this). */
export const MAX_HEADER_BYTES = 16 * 1024;
/** A longer request target is answered 414 before any work. */
export const MAX_URL_BYTES = 8 * 1024;
/** Open connections get this long to finish when the edge stops; then they are closed. */
const STOP_GRACE_MS = 2_000;

type Method = "GET" | "HEAD" | "POST" | "DELETE";

interface PatternRoute {
  /** `/videos/:name` (one segment) or `/api/compat/chat/*` (a prefix). */
  pattern: string;
  method: Method | "*";
  handler: NodeHandler;
  matches: (path: string) => boolean;
}

function matcher(pattern: string): (path: string) => boolean {
  if (pattern.endsWith("/*")) {
    const prefix = pattern.slice(0, -1);
    return (path) => path.startsWith(prefix);
  }
  const parts = pattern.split("/");
  return (path) => {
    const segments = path.split("/");
    return segments.length === parts.length && parts.every((part, i) => part.startsWith(":") ? (segments[i] ?? "") !== "" : part === segments[i]);
  };
}

export interface CorsPolicy {
  /** Origins allowed to call from a browser; "*" for any. Empty: no CORS headers at all. */
  allowedOrigins: readonly string[];
}

/**
 * The edge's HTTP server on node:http (see README "Why node:http"): a small router (exact paths, then
 * `:param` and `*` patterns, then the fallback), 405 with Allow for a known path and another method, CORS
 * when configured, bounded request lines and headers, and the request metrics of every route.
 */
export class HttpApp {
  private readonly exact = new Map<string, Map<Method | "*", NodeHandler>>();
  private readonly patterns: PatternRoute[] = [];
  private fallback: NodeHandler | undefined;
  private server: Server | undefined;
  /** Per route label (bounded: the registered patterns, plus "unmatched" and "method_not_allowed"). */
  private readonly meters = new Map<string, RouteMeters>();

  constructor(
    private readonly cors: CorsPolicy,
    /** Count and time every request (REELAY_METRICS=off turns it off, to measure what it costs). */
    private readonly measure = true,
  ) {}

  get(path: string, handler: NodeHandler): void {
    this.add("GET", path, handler);
  }
  head(path: string, handler: NodeHandler): void {
    this.add("HEAD", path, handler);
  }
  post(path: string, handler: NodeHandler): void {
    this.add("POST", path, handler);
  }
  del(path: string, handler: NodeHandler): void {
    this.add("DELETE", path, handler);
  }
  /** Every method; `/*` is the fallback for whatever no other route takes. */
  any(path: string, handler: NodeHandler): void {
    if (path === "/*") this.fallback = handler;
    else this.add("*", path, handler);
  }

  private add(method: Method | "*", path: string, handler: NodeHandler): void {
    if (path.includes(":") || path.endsWith("/*")) {
      this.patterns.push({ pattern: path, method, handler, matches: matcher(path) });
      // Longer prefixes first, so `/api/compat/models/*` wins over a shorter wildcard.
      this.patterns.sort((a, b) => b.pattern.length - a.pattern.length);
      return;
    }
    const methods = this.exact.get(path) ?? new Map<Method | "*", NodeHandler>();
    methods.set(method, handler);
    this.exact.set(path, methods);
  }

  /** Listens; resolves to the bound port. A port in use is a clear start-up error, never a shared port. */
  listen(host: string, port: number): Promise<number> {
    const server = createServer(
      { maxHeaderSize: MAX_HEADER_BYTES, keepAliveTimeout: 65_000, headersTimeout: 20_000, noDelay: true, joinDuplicateHeaders: true, ServerResponse: MeteredResponse },
      (req, res) => this.handle(req, res),
    );
    server.on("clientError", (error: NodeJS.ErrnoException, socket: Socket) => answerClientError(error, socket));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once("error", (error: NodeJS.ErrnoException) => {
        reject(
          error.code === "EADDRINUSE"
            ? new ConfigError(`port ${port} on ${host} is already in use (another reelay, or another program, listens there): stop it or set PORT to a free port`)
            : error,
        );
      });
      server.listen(port, host, () => {
        const address = server.address();
        resolve(typeof address === "object" && address ? address.port : port);
      });
    });
  }

  /** Stops accepting; idle connections close now, busy ones (streams) get a short grace. */
  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const grace = setTimeout(() => server.closeAllConnections(), STOP_GRACE_MS);
    await closed;
    clearTimeout(grace);
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const started = performance.now();
    const target = req.url ?? "/";
    const path = target.split("?", 1)[0] ?? "/";
    const method = (req.method ?? "GET").toUpperCase();
    const { handler, label, allow } = this.lookup(method, path);
    if (this.measure) meterAnswer(res, this.metersOf(label), started);
    if (this.applyCors(req, res, method)) return;
    if (Buffer.byteLength(target) > MAX_URL_BYTES) return plainError(res, 414, `request target longer than ${MAX_URL_BYTES} bytes`);
    if (handler) return handler(req, res);
    if (allow.length > 0) {
      res.setHeader("allow", allow.join(", "));
      return plainError(res, 405, `${method} is not allowed on ${path.slice(0, 200)} (allowed: ${allow.join(", ")})`);
    }
    if (this.fallback) return this.fallback(req, res);
    plainError(res, 404, "not found");
  }

  /**
   * The metric children of a route, made once: prom-client's `inc(labels)` hashes the label object on
   * every call, which cost more than the rest of a cached query answer.
   */
  private metersOf(route: string): RouteMeters {
    let meters = this.meters.get(route);
    if (!meters) {
      const codes = new Map<number, Counter.Internal>();
      meters = {
        duration: httpRequestDuration.labels({ route }),
        count: (status) => {
          let counter = codes.get(status);
          if (!counter) codes.set(status, (counter = httpRequests.labels({ route, code: String(status) })));
          return counter;
        },
      };
      this.meters.set(route, meters);
    }
    return meters;
  }

  /** The route for a request, its metrics label (the registered pattern: bounded), and the methods its path takes. */
  private lookup(method: string, path: string): { handler?: NodeHandler; label: string; allow: string[] } {
    const methods = this.exact.get(path);
    const exact = methods?.get(method as Method) ?? methods?.get("*");
    if (exact) return { handler: exact, label: path, allow: [] };
    const allow = [...(methods?.keys() ?? [])].filter((m) => m !== "*");
    for (const route of this.patterns) {
      if (!route.matches(path)) continue;
      // A pattern that takes every method (the chat API's OpenAI-shaped 404) answers before a 405.
      if (route.method === "*" || route.method === method) return { handler: route.handler, label: route.pattern, allow: [] };
      allow.push(route.method);
    }
    return { label: methods ? path : allow.length > 0 ? "method_not_allowed" : "unmatched", allow };
  }

  /** Adds CORS headers for an allowed origin; answers preflights. True when the request was answered here. */
  private applyCors(req: IncomingMessage, res: ServerResponse, method: string): boolean {
    const origin = req.headers.origin;
    const allowed = origin !== undefined && (this.cors.allowedOrigins.includes("*") || this.cors.allowedOrigins.includes(origin));
    if (allowed) {
      res.setHeader("access-control-allow-origin", this.cors.allowedOrigins.includes("*") ? "*" : origin);
      res.setHeader("vary", "Origin");
      res.setHeader("access-control-expose-headers", "x-request-id, retry-after");
    }
    if (method !== "OPTIONS") return false;
    // A preflight (or a plain OPTIONS): answered here for every path.
    const headers: Record<string, string> = { "content-length": "0", allow: "GET, HEAD, POST, DELETE, OPTIONS" };
    if (allowed && req.headers["access-control-request-method"]) {
      headers["access-control-allow-methods"] = "GET, HEAD, POST, DELETE, OPTIONS";
      // Browser SDKs send their own headers (the OpenAI one sends x-stainless-*): allow what is asked, bounded.
      const asked = String(req.headers["access-control-request-headers"] ?? "").slice(0, 2048);
      headers["access-control-allow-headers"] = asked || "authorization, content-type, idempotency-key, last-event-id";
      headers["access-control-max-age"] = "600";
    }
    res.writeHead(204, headers);
    res.end();
    answered(res);
    return true;
  }
}

function plainError(res: ServerResponse, status: number, message: string): void {
  const body = JSON.stringify({ code: status, msg: message });
  res.writeHead(status, { "content-type": "application/json", "content-length": String(Buffer.byteLength(body)) });
  res.end(body);
  answered(res);
}

/** A request node:http could not parse: answered (431 for oversized headers, 400 otherwise) and closed. */
function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  if (error.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  const status = error.code === "HPE_HEADER_OVERFLOW" ? 431 : error.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400;
  const message = status === 431 ? `request line and headers exceed ${MAX_HEADER_BYTES} bytes` : status === 408 ? "request not received in time" : "malformed HTTP request";
  const body = JSON.stringify({ code: status, msg: message });
  socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
}
