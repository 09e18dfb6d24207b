import { validate } from "@readme/openapi-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { z } from "zod";
import type { RouteContract } from "../contracts/httpRoute.ts";
import { OPENAI_API, OpenAiErrorBody, SPEC_CHAT } from "../contracts/openAiApi.ts";
import { SpecError, VIDEO_API } from "../contracts/videoApi.ts";
import { OPENAI_ENDPOINTS } from "../services/edge/http/openAiBases.ts";
import { arkSampleVideo } from "./fakes/arkUpstream.ts";
import { ScriptedVendor } from "./fakes/scriptedVendor.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

type Operation = { security?: unknown[]; responses: Record<string, unknown>; parameters?: Array<{ name: string; in: string }> };
type Document = { openapi: string; paths: Record<string, Record<string, Operation>> };

/** Every path a contract is served at: an OpenAI-shaped one under each OpenAI base. */
const servedPaths = (contract: RouteContract): string[] => (contract.bases ?? [""]).map((base) => `${base}${contract.path}`);
const CONTRACTS: RouteContract[] = [...Object.values(VIDEO_API), ...Object.values(OPENAI_API), SPEC_CHAT];

/**
 * The public API's OpenAPI 3.1 document (`GET /openapi.json`, no key) is generated from the edge's route
 * table: it is valid OpenAPI 3.1, names every route of every contract, names only routes the edge serves,
 * and what the edge answers fits the schemas it states (responses are checked here, never on the hot path).
 */
describe("the public API's OpenAPI document", () => {
  let app: TestApp;
  let key: string;
  let document: Document;

  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const answer = await fetch(`${app.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }), ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await answer.text();
    return { status: answer.status, body: answer.headers.get("content-type")?.startsWith("application/json") ? (JSON.parse(text) as unknown) : text };
  };
  /** Parses `body` with the contract's schema for `status`: throws, naming the field, when the answer does not fit. */
  const fits = (contract: RouteContract, status: number, body: unknown) => (contract.responses[status]?.schema as z.ZodType).parse(body);

  beforeAll(async () => {
    app = await startTestApp({ providers: () => new ScriptedVendor({}, arkSampleVideo()) });
    key = await app.keyFor("openapi-reader");
    const answer = await fetch(`${app.baseUrl}/openapi.json`);
    expect(answer.status).toBe(200);
    document = (await answer.json()) as Document;
  });
  afterAll(async () => {
    await app?.stop();
  });

  it("is valid OpenAPI 3.1", async () => {
    expect(document.openapi).toBe("3.1.0");
    const result = await validate(structuredClone(document) as never);
    expect(result.valid ? [] : result.errors).toEqual([]);
  });

  it("names every route of every contract, with its key requirement, query parameters and error shape", () => {
    for (const contract of CONTRACTS) {
      for (const path of servedPaths(contract)) {
        const operation = document.paths[path]?.[contract.method.toLowerCase()];
        expect(operation, `${contract.method} ${path}`).toBeDefined();
        expect(operation?.security ?? [], `${contract.method} ${path}`).toHaveLength(contract.auth ? 1 : 0);
        expect(operation?.responses.default, `${contract.method} ${path}`).toBeDefined();
        const queryNames = (operation?.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name);
        expect(queryNames.sort()).toEqual(Object.keys(contract.query?.shape ?? {}).sort());
      }
    }
    // The endpoints an unknown OpenAI path's 404 names are served ones.
    for (const endpoint of OPENAI_ENDPOINTS) expect(Object.values(OPENAI_API).map((c) => `${c.method} ${c.path}`)).toContain(endpoint);
    expect(document.paths["/api/compat/videosTask"]?.get?.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: "id", in: "query", required: true })]));
  });

  it("names only routes the edge serves: none of its operations is an unknown path or a wrong method", async () => {
    for (const [path, operations] of Object.entries(document.paths)) {
      for (const method of Object.keys(operations)) {
        const concrete = path.replace(/\{\w+\}/g, "x");
        const answer = await fetch(`${app.baseUrl}${concrete}`, { method: method.toUpperCase(), headers: { authorization: "Bearer nobody" } });
        const text = await answer.text();
        expect(answer.status, `${method} ${path}`).not.toBe(405);
        expect(text, `${method} ${path}`).not.toMatch(/no such endpoint|unknown_url/);
      }
    }
  });

  it("the spec's create, query and list answer what their contracts state; errors come in the envelope", async () => {
    const created = await call("POST", "/api/compat/videosGenerations", { model: "VideoModel-2.0-mini", prompt: "a lighthouse at dusk", duration: 4 });
    expect(created.status).toBe(200);
    const { data } = fits(VIDEO_API.create, 200, created.body) as { data: { task_id: number } };
    let query = await call("GET", `/api/compat/videosTask?id=${data.task_id}`);
    for (let tries = 0; tries < 100 && (query.body as { msg?: string }).msg !== "success"; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      query = await call("GET", `/api/compat/videosTask?id=${data.task_id}`);
    }
    expect(fits(VIDEO_API.query, 200, query.body)).toMatchObject({ msg: "success", data: { status: "success", video_url: expect.any(String) } });
    fits(VIDEO_API.list, 200, (await call("GET", "/api/compat/videosTasks?limit=5")).body);
    const refused = await call("GET", "/api/compat/videosTasks?limit=500");
    expect(refused.status).toBe(400);
    expect(SpecError.parse(refused.body)).toEqual({ code: 400, msg: 'limit must be an integer from 1 to 100, got "500"' });
    fits(VIDEO_API.health, 200, (await call("GET", "/healthz")).body);
  });

  it("the OpenAI-shaped routes answer what their contracts state; errors come in OpenAI's shape with the parameter named", async () => {
    const created = await call("POST", "/v1/videos", { model: "VideoModel-2.0-mini", prompt: "a fox in the snow", seconds: "4", size: "1280x720" });
    expect(created.status).toBe(200);
    const video = fits(OPENAI_API.createVideo, 200, created.body) as { id: string };
    fits(OPENAI_API.retrieveVideo, 200, (await call("GET", `/v1/videos/${video.id}`)).body);
    fits(OPENAI_API.listVideos, 200, (await call("GET", "/api/compat/videos?limit=2&order=asc")).body);
    fits(OPENAI_API.models, 200, (await call("GET", "/v1/models")).body);
    fits(OPENAI_API.model, 200, (await call("GET", "/v1/models/echo")).body);
    fits(OPENAI_API.chat, 200, (await call("POST", "/v1/chat/completions", { model: "echo", messages: [{ role: "user", content: "hello" }] })).body);
    const refused = await call("GET", "/v1/videos?order=sideways");
    expect(refused.status).toBe(400);
    expect(OpenAiErrorBody.parse(refused.body).error).toEqual({ message: 'order must be asc or desc, got "sideways"', type: "invalid_request_error", param: "order", code: null });
  });
});
