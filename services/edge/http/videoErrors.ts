import { ReelayError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/log.ts";
import { jsonReply, type HttpReply } from "./reply.ts";

/**
 * The one place where errors become the video API's envelope: HTTP status equals `code` (design.md),
 * the message names the problem, and nothing internal (stack, class name) reaches the client.
 */
export function videoErrorReply(log: Logger) {
  return (error: unknown): HttpReply => {
    if (error instanceof ReelayError) return jsonReply(error.status, { code: error.status, msg: error.message });
    log.error({ err: error }, "unexpected error in a video route");
    return jsonReply(500, { code: 500, msg: "internal error" });
  };
}
