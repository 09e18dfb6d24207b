import type { z } from "zod";
import { ADMIN_TOKEN_PREFIX, AdminTokenStore } from "../../shared/adminTokens.ts";
import { API_KEY_PREFIX } from "../../shared/apiKeys.ts";
import { AuthError, ValidationError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import type { HttpApp } from "../http/httpApp.ts";
import { jsonReply, type HttpReply } from "../http/reply.ts";
import type { RequestInfo } from "../http/request.ts";
import { route } from "../http/route.ts";
import { adminErrorReply } from "./adminErrors.ts";

/** What a handler gets: who is calling (the admin token's name), the parsed query and body, the path's parameters. */
export interface AdminCall<Query, Body> {
  actor: string;
  query: Query;
  body: Body;
  params: Record<string, string>;
  request: RequestInfo;
}

/**
 * One admin endpoint, as data: the router serves it and the OpenAPI document describes it from the same
 * schemas (openApi.ts), so the two cannot drift apart.
 */
export interface AdminEndpoint<Q extends z.ZodType = z.ZodType, B extends z.ZodType = z.ZodType, R extends z.ZodType = z.ZodType> {
  method: "GET" | "POST" | "DELETE";
  /** Under `/admin/v1`, with `{name}` parameters. */
  path: string;
  summary: string;
  query?: Q;
  body?: B;
  response: R;
  /** The success status (200 unless said). */
  status?: number;
  /** Answers something other than JSON (CSV, SSE): the handler writes the reply itself. */
  handle(call: AdminCall<z.infer<Q>, z.infer<B>>): Promise<z.infer<R> | HttpReply>;
}

/** Checks one endpoint's handler against its own schemas, then lists it with the others. */
export const endpoint = <Q extends z.ZodType, B extends z.ZodType, R extends z.ZodType>(definition: AdminEndpoint<Q, B, R>): AdminEndpoint => definition;

export const ADMIN_BASE = "/admin/v1";
const MAX_BODY_BYTES = 64 * 1024;

const isReply = (value: unknown): value is HttpReply & { raw: true } => typeof value === "object" && value !== null && (value as { raw?: unknown }).raw === true;

/** Marks a handler's answer as a whole reply (not JSON to serialize). */
export const rawReply = (reply: HttpReply): HttpReply & { raw: true } => ({ ...reply, raw: true });

const describeIssues = (error: z.ZodError, where: string): string =>
  error.issues.map((issue) => `${where}${issue.path.length ? `.${issue.path.join(".")}` : ""}: ${issue.message}`).join("; ");

/** Registers every endpoint: Bearer admin token, zod-checked query and body, JSON answers, errors in one shape. */
export function registerAdminEndpoints(app: HttpApp, endpoints: readonly AdminEndpoint[], deps: { tokens: AdminTokenStore; log: Logger }): void {
  const replyForError = adminErrorReply(deps.log);
  for (const endpoint of endpoints) {
    const pattern = `${ADMIN_BASE}${endpoint.path.replace(/\{(\w+)\}/g, ":$1")}`;
    const names = [...endpoint.path.matchAll(/\{(\w+)\}/g)].map((match) => match[1] ?? "");
    const handler = route(
      async (request, body) => {
        const actor = await authenticateAdmin(deps.tokens, request.header("authorization"));
        const params = paramsOf(pattern, request.url, names);
        const query = endpoint.query ? parse(endpoint.query, Object.fromEntries(new URLSearchParams(request.query)), "query") : undefined;
        const parsedBody = endpoint.body ? parse(endpoint.body, jsonOf(body), "body") : undefined;
        const answer = await endpoint.handle({ actor, query, body: parsedBody, params, request });
        return isReply(answer) ? answer : jsonReply(endpoint.status ?? 200, answer);
      },
      { replyForError, ...(endpoint.body ? { maxBodyBytes: MAX_BODY_BYTES } : {}) },
    );
    if (endpoint.method === "GET") app.get(pattern, handler);
    else if (endpoint.method === "POST") app.post(pattern, handler);
    else app.delete(pattern, handler);
  }
}

/** The admin token's name, or a 401: customer API keys never open admin routes (they are not in its bucket). */
export async function authenticateAdmin(tokens: AdminTokenStore, authorization: string): Promise<string> {
  const token = /^Bearer\s+(\S+)$/i.exec(authorization)?.[1];
  if (!token) throw new AuthError("missing admin token: send Authorization: Bearer <admin token> (reelay admin tokens create --name <you>)");
  const record = await tokens.lookup(token);
  if (!record) {
    // A customer API key is never an admin token: say so, so nobody hunts for a typo in it.
    throw new AuthError(token.startsWith(API_KEY_PREFIX) ? `invalid admin token: this is a customer API key (${API_KEY_PREFIX}…); the admin API takes an admin token (${ADMIN_TOKEN_PREFIX}…, reelay admin tokens create --name <you>)` : "invalid admin token");
  }
  return record.name;
}

function paramsOf(pattern: string, url: string, names: readonly string[]): Record<string, string> {
  const parts = pattern.split("/");
  const segments = url.split("/");
  const params: Record<string, string> = {};
  let index = 0;
  parts.forEach((part, i) => {
    if (!part.startsWith(":")) return;
    const name = names[index++] ?? part.slice(1);
    try {
      params[name] = decodeURIComponent(segments[i] ?? "");
    } catch {
      throw new ValidationError(`path parameter ${name} is not valid URL encoding`);
    }
  });
  return params;
}

function jsonOf(body: Buffer | undefined): unknown {
  const text = (body ?? Buffer.alloc(0)).toString("utf8");
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ValidationError(`body is not valid JSON: ${(error as Error).message}`);
  }
}

function parse<T extends z.ZodType>(schema: T, value: unknown, where: string): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new ValidationError(describeIssues(parsed.error, where));
  return parsed.data;
}

