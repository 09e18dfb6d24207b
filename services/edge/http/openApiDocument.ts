import { z } from "zod";
import type { ApiFamily, RouteContract } from "../../../contracts/httpRoute.ts";
import { OpenAiErrorBody } from "../../../contracts/openAiApi.ts";
import { SpecError } from "../../../contracts/videoApi.ts";
import type { TableRoute } from "./routeTable.ts";

type JsonSchema = Record<string, unknown>;

/** A zod schema as JSON Schema 2020-12 (what OpenAPI 3.1 uses as is), as a client sends it (`io: "input"`). */
function jsonSchema(schema: z.ZodType): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as JsonSchema;
  return rest;
}

/** Query or header parameters from an object schema: one per property. */
function parametersOf(schema: z.ZodObject | undefined, where: "query" | "header"): JsonSchema[] {
  if (!schema) return [];
  const object = jsonSchema(schema);
  const required = (object.required ?? []) as string[];
  return Object.entries((object.properties ?? {}) as Record<string, JsonSchema>).map(([name, property]) => ({
    name,
    in: where,
    required: required.includes(name),
    ...(typeof property.description === "string" ? { description: property.description } : {}),
    schema: property,
  }));
}

const ERRORS: Record<ApiFamily, { description: string; schema: z.ZodType }> = {
  spec: { description: "an error in the spec's envelope: HTTP status = `code`, `msg` names the problem", schema: SpecError },
  openai: { description: "an error in OpenAI's shape, with the status OpenAI sends for the same condition (docs/api.md)", schema: OpenAiErrorBody },
};

function operationOf(contract: RouteContract, path: string): JsonSchema {
  const pathParameters = [...path.matchAll(/\{(\w+)\}/g)].map((match) => ({ name: match[1], in: "path", required: true, schema: { type: "string" } }));
  const parameters = [...pathParameters, ...parametersOf(contract.query, "query"), ...parametersOf(contract.headers, "header")];
  const responses: Record<string, JsonSchema> = {};
  for (const [status, answer] of Object.entries(contract.responses)) {
    const contentType = answer.contentType ?? "application/json";
    const schema = answer.schema ? jsonSchema(answer.schema) : { type: "string", ...(contentType.startsWith("text/") ? {} : { contentMediaType: contentType }) };
    responses[status] = { description: answer.description, ...(status === "304" ? {} : { content: { [contentType]: { schema } } }) };
  }
  const error = ERRORS[contract.family];
  responses.default = { description: error.description, content: { "application/json": { schema: jsonSchema(error.schema) } } };
  return {
    // Unique as the path is: `/api/compat/chatCompletions` and `/api/compat/chat/completions` are two operations.
    operationId: `${contract.method.toLowerCase()}${path.replace(/[^A-Za-z0-9]/g, "_")}`,
    summary: contract.summary,
    tags: [contract.family === "openai" ? "OpenAI-shaped API" : "Video API"],
    security: contract.auth ? [{ apiKey: [] }] : [],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(contract.body
      ? { requestBody: { required: true, content: Object.fromEntries(Object.entries(contract.body).map(([type, schema]) => [type, { schema: jsonSchema(schema) }])) } }
      : {}),
    responses,
  };
}

/**
 * The public API as OpenAPI 3.1, generated from the edge's route table: every served path, with the
 * contract's schemas (contracts/videoApi.ts, contracts/openAiApi.ts) and the error shape of its family.
 */
export function publicOpenApiDocument(rows: readonly TableRoute[]): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const row of rows) {
    const operations = (paths[row.path] ??= {});
    operations[row.contract.method.toLowerCase()] = operationOf(row.contract, row.path);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "reelay",
      version: "1",
      description:
        "Video generation and chat completions: the spec's video API (`/api/compat/videos…`) and the OpenAI-shaped API under `/v1` and `/api/compat`. Bearer API keys from `reelay keys create`.",
    },
    tags: [
      { name: "Video API", description: "The spec's endpoints: the `{code, msg, data}` envelope" },
      { name: "OpenAI-shaped API", description: "Chat completions, models and OpenAI's Videos API, as every OpenAI SDK calls them" },
    ],
    components: { securitySchemes: { apiKey: { type: "http", scheme: "bearer", description: "a reelay API key" } } },
    paths,
  };
}
