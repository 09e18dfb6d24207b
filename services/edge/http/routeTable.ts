import { lruOf } from "../../shared/lruOf.ts";
import type { z } from "zod";
import type { ApiFamily, RouteContract } from "../../../contracts/httpRoute.ts";
import { ValidationError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import type { ResponseSink } from "../chat/responseSink.ts";
import { streamRoute, type StreamErrors } from "../chat/streamRoute.ts";
import { openAiError, openAiErrorEvent } from "./openAiErrors.ts";
import { jsonReply, type HttpReply } from "./reply.ts";
import type { RequestInfo } from "./request.ts";
import type { HttpApp } from "./httpApp.ts";
import { route, type NodeHandler } from "./route.ts";
import type { BodyGate } from "./bodyGate.ts";
import { videoError } from "./videoErrors.ts";

/**
 * What a handler gets: the request, its body (when the route reads one), and its query parsed by the
 * contract's schema when first read (read it after authenticating: destructuring it reads it).
 */
export interface RouteCall<C extends RouteContract> {
  request: RequestInfo;
  body: Buffer | undefined;
  query: C["query"] extends z.ZodType ? z.output<C["query"]> : undefined;
}

/** A handler that answers with one reply. */
export type ReplyHandler<C extends RouteContract> = (call: RouteCall<C>) => HttpReply | Promise<HttpReply>;
/** A handler that answers through a sink: one reply or a stream (chat, event streams). */
export type SinkHandler<C extends RouteContract> = (call: RouteCall<C>, sink: ResponseSink) => void | Promise<void>;

export interface BindOptions {
  /** Read the body (up to this many bytes) before calling the handler. */
  maxBodyBytes?: number;
  /** Long-lived streams fanned out to many clients: no chunked encoding (see NodeResponseSink). */
  closeDelimited?: boolean;
  /** The path's last parameter takes the rest of the path, slashes included (model ids such as "org/model"). */
  restParameter?: boolean;
}

/** One row of the edge's route table: the contract (method, path, schemas) and the handler bound to it. */
export interface TableRoute {
  contract: RouteContract;
  /** The served path (`{name}` parameters); an OpenAI-shaped contract has one row per OpenAI base. */
  path: string;
  options: BindOptions;
  handler: { kind: "reply"; handle: ReplyHandler<RouteContract> } | { kind: "sink"; handle: SinkHandler<RouteContract> };
}

const pathsOf = (contract: RouteContract): string[] => (contract.bases ? contract.bases.map((base) => `${base}${contract.path}`) : [contract.path]);

/** Rows for a handler answering with one reply, at every path the contract is served under. */
export function replyRoute<C extends RouteContract>(contract: C, handle: ReplyHandler<C>, options: BindOptions = {}): TableRoute[] {
  return pathsOf(contract).map((path) => ({ contract, path, options, handler: { kind: "reply", handle: handle as ReplyHandler<RouteContract> } }));
}

/** Rows for a handler answering through a sink, at every path the contract is served under. */
export function sinkRoute<C extends RouteContract>(contract: C, handle: SinkHandler<C>, options: BindOptions = {}): TableRoute[] {
  return pathsOf(contract).map((path) => ({ contract, path, options, handler: { kind: "sink", handle: handle as SinkHandler<RouteContract> } }));
}

/**
 * A query string as the contract's object schema takes it: each parameter's first value (as
 * URLSearchParams.get reads it); a parameter the schema refuses is a 400 naming it (OpenAI's `param`).
 */
function parseQuery<S extends z.ZodObject>(schema: S, query: string): z.output<S> {
  const params = new URLSearchParams(query);
  const values: Record<string, string> = {};
  for (const name of Object.keys(schema.shape)) {
    const value = params.get(name);
    if (value !== null) values[name] = value;
  }
  const parsed = schema.safeParse(values);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const param = issue?.path[0];
  throw new ValidationError(issue?.message ?? "invalid query", param === undefined ? {} : { param: String(param) });
}

/** How each API family answers a failure: before a stream starts as a reply, after it as a last event. */
function familyErrors(family: ApiFamily, log: Logger): StreamErrors {
  if (family === "openai") return { reply: (error) => openAiError(error, log), event: (error) => openAiErrorEvent(error, log) };
  return {
    reply: (error) => videoError(error, log),
    event: (error) => `event: error\ndata: ${JSON.stringify(videoError(error, log).body)}\n\n`,
  };
}

/** Parsed queries a route keeps: polling clients send the same few queries again and again. */
const PARSED_QUERIES_KEPT = 4096;

/**
 * A route's query schema with the queries it parsed, by their text: a poll (`videosTask?id=42` every few
 * seconds) costs a lookup (about 0.05 µs) instead of a parse (about 0.4 µs, 2% of a cached query answer).
 * Bounded, and only valid queries are kept; a kept answer is frozen, since every request shares it.
 */
class QueryParser {
  private readonly parsed = lruOf<string, Record<string, unknown>>(PARSED_QUERIES_KEPT);
  constructor(private readonly schema: z.ZodObject) {}
  parse(query: string): Record<string, unknown> {
    let value = this.parsed.get(query);
    if (value === undefined) {
      value = Object.freeze(parseQuery(this.schema, query));
      this.parsed.set(query, value);
    }
    return value;
  }
}

/**
 * The query is parsed when the handler first reads it, after it has authenticated the caller: a request
 * without a key is a 401 whatever its query. A class, not a closure per request (under tsx each named
 * closure costs a defineProperty, measurable on the cached query answer).
 */
class Call {
  constructor(
    private readonly parser: QueryParser | undefined,
    readonly request: RequestInfo,
    readonly body: Buffer | undefined,
  ) {}
  get query(): Record<string, unknown> | undefined {
    return this.parser?.parse(this.request.query);
  }
}

/** The node:http handler of one row (http/route.ts and chat/streamRoute.ts adapt; handlers never see node:http). */
function nodeHandlerOf(row: TableRoute, log: Logger, gate: BodyGate | undefined): NodeHandler {
  const { contract, options, handler } = row;
  const gating = gate === undefined || options.maxBodyBytes === undefined ? {} : { gate, keyed: contract.auth };
  const errors = familyErrors(contract.family, log);
  const parser = contract.query ? new QueryParser(contract.query) : undefined;
  const callOf = (request: RequestInfo, body: Buffer | undefined): RouteCall<RouteContract> => new Call(parser, request, body) as RouteCall<RouteContract>;
  if (handler.kind === "sink") {
    const { handle } = handler;
    return streamRoute((request, body, sink) => handle(callOf(request, body), sink), {
      log,
      errors,
      ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
      ...(options.closeDelimited ? { closeDelimited: true } : {}),
      ...gating,
    });
  }
  const { handle } = handler;
  const replyForError = (error: unknown): HttpReply => {
    const answer = errors.reply(error);
    return jsonReply(answer.status, answer.body, answer.headers);
  };
  return route((request, body) => handle(callOf(request, body)), { replyForError, ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }), ...gating });
}

/** Serves every row of the table on the app; `gate` lets each body in before it is read. */
export function mountRoutes(app: HttpApp, rows: readonly TableRoute[], log: Logger, gate?: BodyGate): void {
  for (const row of rows) app.add(row.contract.method, patternOf(row), nodeHandlerOf(row, log, gate));
}

/** The router's pattern for a row: `{name}` → `:name`, or a trailing `*` for a rest parameter. */
function patternOf(row: TableRoute): string {
  if (row.options.restParameter) return row.path.replace(/\{\w+\}$/, "*");
  return row.path.replace(/\{(\w+)\}/g, ":$1");
}
