import { NotFoundError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import { openAiError } from "./openAiErrors.ts";
import { jsonReply, type HttpReply } from "./reply.ts";
import { videoError } from "./videoErrors.ts";
import { isOpenAiPath, OPENAI_ENDPOINTS } from "./openAiBases.ts";

/** Maps an error to a reply in the format of the API a path belongs to: OpenAI's shape or the video envelope. */
export type ErrorReplyFor = (path: string, error: unknown) => HttpReply;

/** For answers no route wrote (unknown path, wrong method, too long a target, an unparsable request). */
export function apiErrorReply(log: Logger): ErrorReplyFor {
  return (path, error) => {
    const answer = isOpenAiPath(path) ? openAiError(error, log) : videoError(error, log);
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
  return new NotFoundError(
    `Unknown request URL: ${what}. Please check the URL for typos; reelay serves these endpoints of the OpenAI API under /v1 and /api/compat: ${OPENAI_ENDPOINTS.join(", ")}.`,
    { code: "unknown_url" },
  );
}
