/**
 * Where the OpenAI-shaped API is served: under the spec's `/api/compat`, and at `/v1`, the path every OpenAI
 * SDK default and OpenAI-speaking gateway appends or expects (new-api's video channels always append
 * `/v1/videos…` to a base URL; many tools require a base URL ending in `/v1`). The same handlers answer both.
 */
export const OPENAI_BASES = ["/api/compat", "/v1"] as const;

/**
 * The spec's own video API: `/api/compat/videosGenerations`, `/api/compat/videosTask` and their event
 * streams (names that go on after `videos`). It exists only under `/api/compat`.
 */
const SPEC_VIDEO_API = /^\/api\/compat\/videos[^/]/;

/** A path of the OpenAI-shaped API (served or not): its answers come in OpenAI's error shape. */
export const isOpenAiPath = (path: string): boolean =>
  path === "/v1" || path.startsWith("/v1/") || (path.startsWith("/api/compat/") && !SPEC_VIDEO_API.test(path));

/** The OpenAI endpoints reelay serves, relative to a base (for the 404 of an unknown OpenAI path). */
export const OPENAI_ENDPOINTS = [
  "POST /chat/completions",
  "GET /models",
  "POST /videos",
  "GET /videos",
  "GET /videos/{id}",
  "GET /videos/{id}/content",
  "DELETE /videos/{id}",
  "POST /videos/{id}/remix",
] as const;
