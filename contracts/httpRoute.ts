import type { z } from "zod";

/**
 * One HTTP endpoint as data: method, path, what it takes and what it answers. The edge binds a handler to
 * each (services/edge/routes/), and the OpenAPI document is generated from the same declarations, so the
 * two cannot drift apart.
 */
export type HttpMethod = "GET" | "POST" | "DELETE";

/**
 * Which API an endpoint belongs to, and so in which shape its errors answer: the spec's envelope
 * `{code, msg}`, OpenAI's `{error:{message,type,param,code}}`, or the plain status of a file or probe.
 */
export type ApiFamily = "spec" | "openai";

export interface ResponseContract {
  description: string;
  /** `application/json` unless said. */
  contentType?: string;
  /** The body's schema (absent for bodies that are bytes: videos, images, metrics, event streams). */
  schema?: z.ZodType;
}

export interface RouteContract {
  method: HttpMethod;
  /** With `{name}` parameters; relative to each of `bases` when there are some. */
  path: string;
  /** Served under each of these prefixes (the OpenAI-shaped API: `/api/compat` and `/v1`). */
  bases?: readonly string[];
  family: ApiFamily;
  summary: string;
  /** A customer's `Authorization: Bearer <API key>`; false for probes, files (their name is the capability) and vendor callbacks. */
  auth: boolean;
  /** The query string's parameters (each a string as sent; the schema parses them). */
  query?: z.ZodObject;
  /** Request headers the endpoint reads (lower-case names). */
  headers?: z.ZodObject;
  /** Request bodies by content type. */
  body?: Record<string, z.ZodType>;
  /** Answers by status; errors in the family's shape are added for every endpoint. */
  responses: Record<number, ResponseContract>;
}

/** Declares a contract, keeping its literal type (the edge binds handlers to the schemas' types). */
export const routeContract = <const R extends RouteContract>(contract: R): R => contract;
