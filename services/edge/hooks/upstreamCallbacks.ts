import type { NatsConnection } from "@nats-io/transport-node";
import type { ReelayConfig } from "../../../contracts/config.ts";
import { RUNNER_SUBJECTS, type UpstreamNews } from "../../../contracts/runnerControl.ts";
import type { Logger } from "../../shared/log.ts";
import { NotFoundError, ValidationError } from "../../shared/errors.ts";
import type { HttpApp } from "../http/httpApp.ts";
import type { ErrorReplyFor } from "../http/apiErrors.ts";
import { jsonReply } from "../http/reply.ts";
import { route } from "../http/route.ts";

/** A callback is a task object of a few hundred bytes; anything much larger is not one. */
const MAX_CALLBACK_BYTES = 64 * 1024;

/** The upstream's id of the task a callback is about, by the channel's kind (Ark: the task object's `id`). */
function providerTaskIdOf(kind: string, body: unknown): string | undefined {
  if (kind !== "ark" || typeof body !== "object" || body === null) return undefined;
  const id = (body as { id?: unknown }).id;
  return typeof id === "string" && id.length > 0 && id.length <= 200 ? id : undefined;
}

/**
 * `POST /hooks/upstream/<channel>`: an upstream says one of its tasks changed. Nothing in the body is
 * trusted (Ark does not sign callbacks): it only tells the runner hosting the task to ask the upstream now,
 * over core NATS. A lost hint costs nothing but latency: the task is polled on schedule anyway.
 */
export function registerUpstreamCallbacks(app: HttpApp, deps: { config: ReelayConfig; nc: NatsConnection; log: Logger; errorReply: ErrorReplyFor }): void {
  const replyForError = (error: unknown) => deps.errorReply("/hooks/upstream", error);
  app.post(
    "/hooks/upstream/:channel",
    route(
      (request, body) => {
        const channel = decodeURIComponent(request.url.slice("/hooks/upstream/".length));
        const settings = Object.hasOwn(deps.config.providers, channel) ? deps.config.providers[channel] : undefined;
        if (settings?.kind !== "ark" || settings.publicCallbackUrl === undefined) throw new NotFoundError(`no upstream channel takes callbacks here: ${channel}`);
        let parsed: unknown;
        try {
          parsed = JSON.parse((body ?? Buffer.alloc(0)).toString("utf8"));
        } catch {
          throw new ValidationError("the callback body is not JSON");
        }
        const providerTaskId = providerTaskIdOf(settings.kind, parsed);
        if (providerTaskId === undefined) throw new ValidationError("the callback names no task (id)");
        deps.nc.publish(RUNNER_SUBJECTS.upstreamNews, JSON.stringify({ channel, providerTaskId } satisfies UpstreamNews));
        deps.log.debug({ channel, providerTaskId }, "upstream callback: the task's runner asks now");
        return jsonReply(200, {});
      },
      { maxBodyBytes: MAX_CALLBACK_BYTES, replyForError },
    ),
  );
}
