import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { HeadersTooLargeError, MethodNotAllowedError, NotImplementedError, UriTooLongError, ValidationError } from "../../shared/errors.ts";
import { listenOn, type ListenSettings } from "../../shared/listenOn.ts";
import { unknownPath, type ErrorReplyFor } from "./apiErrors.ts";
import { answered, MeteredResponse, meterAnswer, RouteMeterTable } from "./answerMeter.ts";
import { answerUnparsed, rawReply, type ClientError } from "./clientErrors.ts";
import { MAX_HEADER_BYTES, MAX_HEADER_COUNT, MAX_URL_BYTES } from "./limits.ts";
import { writeReply } from "./reply.ts";
import type { NodeHandler } from "./route.ts";

/** Open connections get this long to finish when the edge stops; then they are closed. */
const STOP_GRACE_MS = 2_000;
/**
 * A whole request (head and a body of up to `limits.maxBodyBytes`) must arrive within this; a slow mobile
 * upload of 1 MiB fits. Streams being answered are not affected (the clock stops once the request is in).
 */
const REQUEST_TIMEOUT_MS = 120_000;
/**
 * Connections the kernel may hold before we accept them (node's default is 511). Past it, a burst of
 * connects (3,000 clients at once sending oversized heads) saw hundreds reset without an answer; the
 * kernel caps it at net.core.somaxconn.
 */
const LISTEN_BACKLOG = 4096;
/** How often node:http looks for requests past those timeouts (its default, 30 s, lets a slow client hold a socket 50 s). */
const TIMEOUT_CHECK_MS = 5_000;

type Method = "GET" | "POST" | "DELETE";
const ALL_METHODS = "GET, HEAD, POST, DELETE, OPTIONS";

interface PatternRoute {
  /** `/videos/:name` (one segment) or `/api/compat/models/*` (a prefix). */
  pattern: string;
  method: Method;
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
 * The edge's HTTP server on node:http (see docs/decisions.md, "HTTP edge: node:http"): a small router (exact paths, then
 * `:param` and `*` patterns), 404 for the rest, 405 with Allow for a known path and another method, CORS
 * when configured, bounded request lines and headers, and the request metrics of every route. Answers
 * that no route writes (404, 405, 414, 400, an unparsable request) come in the format of the path's API.
 */
export class HttpApp {
  private readonly exact = new Map<string, Map<Method, NodeHandler>>();
  private readonly patterns: PatternRoute[] = [];
  private server: Server | undefined;
  /** Per route label (bounded: the registered patterns, plus "unmatched" and "method_not_allowed"). */
  private readonly meters = new RouteMeterTable();

  constructor(
    private readonly cors: CorsPolicy,
    private readonly errorReply: ErrorReplyFor,
    /** Count and time every request (REELAY_METRICS=off turns it off, to measure what it costs). */
    private readonly measure = true,
  ) {}

  get(path: string, handler: NodeHandler): void {
    this.add("GET", path, handler);
  }
  post(path: string, handler: NodeHandler): void {
    this.add("POST", path, handler);
  }
  delete(path: string, handler: NodeHandler): void {
    this.add("DELETE", path, handler);
  }
  add(method: Method, path: string, handler: NodeHandler): void {
    if (path.includes(":") || path.endsWith("/*")) {
      this.patterns.push({ pattern: path, method, handler, matches: matcher(path) });
      // Longer prefixes first, so `/api/compat/models/*` wins over a shorter wildcard.
      this.patterns.sort((a, b) => b.pattern.length - a.pattern.length);
      return;
    }
    const methods = this.exact.get(path) ?? new Map<Method, NodeHandler>();
    methods.set(method, handler);
    this.exact.set(path, methods);
  }

  /**
   * Listens; resolves to the bound port. A port in use (never shared) or an unusable host is a clear start-up
   * error naming the `settings` that chose them. Past `maxConnections` open at once, a new connection is
   * closed as soon as it is accepted (node:http's `maxConnections`): its file goes back at once.
   */
  listen(host: string, port: number, settings: ListenSettings = { host: "HOST", port: "PORT" }, maxConnections?: number): Promise<number> {
    const server = createServer(
      {
        maxHeaderSize: MAX_HEADER_BYTES,
        // Longer than the usual 60 s idle timeout of load balancers, so they never reuse a connection we close.
        keepAliveTimeout: 65_000,
        headersTimeout: 20_000,
        requestTimeout: REQUEST_TIMEOUT_MS,
        connectionsCheckingInterval: TIMEOUT_CHECK_MS,
        noDelay: true,
        joinDuplicateHeaders: true,
        // Checked in `handle`, so the 400 comes in the API's format (node:http's own is an empty body).
        requireHostHeader: false,
        ServerResponse: MeteredResponse,
      },
      (req, res) => this.handle(req, res),
    );
    // One more than allowed is kept, so a request over the limit is seen (and refused) rather than cut short.
    server.maxHeadersCount = MAX_HEADER_COUNT + 1;
    if (maxConnections !== undefined) server.maxConnections = maxConnections;
    server.on("clientError", (error: ClientError, socket: Duplex) => answerUnparsed(error, socket, this.errorReply));
    // node:http hands a CONNECT's socket to this listener, or drops the connection unanswered without one.
    server.on("connect", (req: IncomingMessage, socket: Duplex) => {
      socket.on("error", () => socket.destroy());
      socket.end(rawReply(this.errorReply(req.url ?? "/", new NotImplementedError("CONNECT is not supported: reelay is not a proxy"))));
    });
    this.server = server;
    return listenOn(server, { port, host, backlog: LISTEN_BACKLOG }, settings);
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
    if (this.measure) meterAnswer(res, this.meters.of(label), started);
    // node:http takes `GET /` without a version as HTTP/0.9; nothing reelay serves speaks it, and an answer
    // to a line that is not HTTP/1.x could be read as anything by whatever sent it.
    if (req.httpVersionMajor !== 1) return this.refuse(res, path, new ValidationError("only HTTP/1.0 and HTTP/1.1 requests are served"), true);
    if (req.rawHeaders.length / 2 > MAX_HEADER_COUNT) return this.refuse(res, path, new HeadersTooLargeError(`more than ${MAX_HEADER_COUNT} header fields`), true);
    if (target.length > MAX_URL_BYTES) return this.refuse(res, path, new UriTooLongError(`request target longer than ${MAX_URL_BYTES} bytes`));
    const host = req.headers.host;
    // HTTP/1.1 requires exactly one Host; several (joined with commas) would let two hops disagree on the target.
    if (host === undefined ? req.httpVersion === "1.1" : host.includes(",")) {
      return this.refuse(res, path, new ValidationError(host === undefined ? "HTTP/1.1 requests need a Host header" : "more than one Host header"));
    }
    if (this.applyCors(req, res, method)) return;
    if (handler) return handler(req, res);
    if (allow.length > 0) return this.refuse(res, path, new MethodNotAllowedError(`${method} is not allowed on ${path.slice(0, 200)} (allowed: ${allow.join(", ")})`, allow));
    this.refuse(res, path, unknownPath(method, path));
  }

  /** `closeConnection` when the request may have a body we will not read. */
  private refuse(res: ServerResponse, path: string, error: unknown, closeConnection = false): void {
    writeReply(res, this.errorReply(path, error), closeConnection);
  }


  /** The route for a request, its metrics label (the registered pattern: bounded), and the methods its path takes. */
  private lookup(method: string, path: string): { handler?: NodeHandler; label: string; allow: string[] } {
    const found = this.find(method, path);
    if (found.handler || method !== "HEAD") return found;
    // HEAD is GET without the body (HTTP requires it wherever GET works; node:http drops the body itself).
    const get = this.find("GET", path);
    return get.handler ? get : found;
  }

  private find(method: string, path: string): { handler?: NodeHandler; label: string; allow: string[] } {
    const methods = this.exact.get(path);
    const exact = methods?.get(method as Method);
    if (exact) return { handler: exact, label: path, allow: [] };
    const allow: string[] = [...(methods?.keys() ?? [])];
    for (const route of this.patterns) {
      if (!route.matches(path)) continue;
      if (route.method === method) return { handler: route.handler, label: route.pattern, allow: [] };
      allow.push(route.method);
    }
    if (allow.includes("GET")) allow.push("HEAD");
    return { label: methods ? path : allow.length > 0 ? "method_not_allowed" : "unmatched", allow };
  }

  /** Adds CORS headers for an allowed origin; answers preflights. True when the request was answered here. */
  private applyCors(req: IncomingMessage, res: ServerResponse, method: string): boolean {
    const origin = req.headers.origin;
    const anyOrigin = this.cors.allowedOrigins.includes("*");
    const allowed = origin !== undefined && (anyOrigin || this.cors.allowedOrigins.includes(origin));
    // With a list, answers differ by Origin: caches (a CDN in front of /videos) must keep them apart.
    if (!anyOrigin && this.cors.allowedOrigins.length > 0) res.setHeader("vary", "Origin");
    if (allowed) {
      res.setHeader("access-control-allow-origin", anyOrigin ? "*" : origin);
      res.setHeader("access-control-expose-headers", "x-request-id, retry-after");
    }
    if (method !== "OPTIONS") return false;
    // A preflight (or a plain OPTIONS): answered here for every path; from an origin not allowed, without
    // any Access-Control-* header, so the browser refuses the call it was asking about.
    const headers: Record<string, string> = { "content-length": "0", allow: ALL_METHODS };
    if (allowed && req.headers["access-control-request-method"]) {
      headers["access-control-allow-methods"] = ALL_METHODS;
      // Browser SDKs send their own headers (the OpenAI one sends x-stainless-*): allow what is asked, bounded.
      const asked = String(req.headers["access-control-request-headers"] ?? "").slice(0, 2048);
      headers["access-control-allow-headers"] = asked || "authorization, content-type, idempotency-key, last-event-id, x-request-id";
      headers["access-control-max-age"] = "600";
    }
    res.writeHead(204, headers);
    res.end();
    answered(res);
    return true;
  }
}
