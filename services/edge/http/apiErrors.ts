import { NotFoundError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import { chatError, withDetail } from "../chat/chatErrors.ts";
import { jsonReply, type HttpReply } from "./reply.ts";
import { videoError } from "./videoErrors.ts";

/**
 * The spec's video API: `/api/compat/videosGenerations`, `/api/compat/videosTask` and their event streams
 * (names that go on after `videos`). Everything else under `/api/compat/` is the OpenAI-compatible API, whose
 * clients call paths reelay does not serve — OpenAI's own `/videos` and `/videos/{id}` among them.
 */
const VIDEO_API = /^\/api\/compat\/videos[^/]/;
const isOpenAiPath = (path: string): boolean => path.startsWith("/api/compat/") && !VIDEO_API.test(path);

/** Maps an error to a reply in the format of the API a path belongs to: OpenAI's shape or the video envelope. */
export type ErrorReplyFor = (path: string, error: unknown) => HttpReply;

/** For answers no route wrote (unknown path, wrong method, too long a target, an unparsable request). */
export function apiErrorReply(log: Logger): ErrorReplyFor {
  return (path, error) => {
    const answer = isOpenAiPath(path) ? chatError(error, log) : videoError(error, log);
    return jsonReply(answer.status, answer.body, answer.headers);
  };
}

/**
 * What an unknown path answers: under the OpenAI API, OpenAI's words and code for an unknown URL (its
 * clients raise their not-found error; the second sentence is ours: OpenAI's points at its own docs);
 * elsewhere the envelope's.
 */
export function unknownPath(method: string, path: string): NotFoundError {
  const what = `${method} ${path.slice(0, 200)}`;
  if (!isOpenAiPath(path)) return new NotFoundError(`no such endpoint: ${what}`);
  return withDetail(
    new NotFoundError(
      `Unknown request URL: ${what}. Please check the URL for typos; reelay serves POST /api/compat/chat/completions and GET /api/compat/models of the OpenAI API.`,
    ),
    { code: "unknown_url" },
  );
}
