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
