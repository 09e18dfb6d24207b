import { z } from "zod";
import { AdminError } from "../../../contracts/adminApi.ts";
import { ADMIN_BASE, type AdminEndpoint } from "./adminApi.ts";

const jsonSchema = (schema: z.ZodType): Record<string, unknown> => z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;

const ERRORS = {
  "400": "the request is malformed; `error.message` names the field",
  "401": "no admin token, or one that is not valid (customer API keys are not admin tokens)",
  "404": "no such account, key or task",
};

/**
 * The admin API as OpenAPI 3.1, generated from the same endpoint table and zod schemas the router serves
 * (JSON Schema 2020-12, which OpenAPI 3.1 uses as is).
 */
export function openApiDocument(endpoints: readonly AdminEndpoint[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const endpoint of endpoints) {
    const path = `${ADMIN_BASE}${endpoint.path}`;
    const pathParameters = [...endpoint.path.matchAll(/\{(\w+)\}/g)].map((match) => ({ name: match[1], in: "path", required: true, schema: { type: "string" } }));
    const queryParameters = endpoint.query
      ? Object.entries((jsonSchema(endpoint.query).properties ?? {}) as Record<string, unknown>).map(([name, schema]) => ({
          name,
          in: "query",
          required: ((jsonSchema(endpoint.query as z.ZodType).required ?? []) as string[]).includes(name),
          schema,
        }))
      : [];
    paths[path] ??= {};
    (paths[path] as Record<string, unknown>)[endpoint.method.toLowerCase()] = {
      summary: endpoint.summary,
      security: [{ adminToken: [] }],
      ...(pathParameters.length + queryParameters.length > 0 ? { parameters: [...pathParameters, ...queryParameters] } : {}),
      ...(endpoint.body ? { requestBody: { required: true, content: { "application/json": { schema: jsonSchema(endpoint.body) } } } } : {}),
      responses: {
        [String(endpoint.status ?? 200)]: { description: "success", content: { "application/json": { schema: jsonSchema(endpoint.response) } } },
        ...Object.fromEntries(Object.entries(ERRORS).map(([status, description]) => [status, { description, content: { "application/json": { schema: jsonSchema(AdminError) } } }])),
      },
    };
  }
  paths[`${ADMIN_BASE}/events`] = {
    get: {
      summary: "Every task and ledger event from now on, as Server-Sent Events (`event: task` / `event: ledger`, `data:` the stored event)",
      security: [{ adminToken: [] }],
      responses: { "200": { description: "an event stream", content: { "text/event-stream": { schema: { type: "string" } } } } },
    },
  };
  return {
    openapi: "3.1.0",
    info: { title: "reelay admin API", version: "1", description: "Operators' API: accounts, balances, keys, tasks and channels. Bearer admin tokens from `reelay admin tokens create`." },
    components: { securitySchemes: { adminToken: { type: "http", scheme: "bearer" } } },
    paths,
  };
}
