import type { NatsConnection } from "@nats-io/transport-node";
import type { ReelayConfig } from "../../../contracts/config.ts";
import { RUNNER_SUBJECTS, type UpstreamNews } from "../../../contracts/runnerControl.ts";
import type { Logger } from "../../shared/log.ts";
import { NotFoundError, ValidationError } from "../../shared/errors.ts";
import { VIDEO_API } from "../../../contracts/videoApi.ts";
import { jsonReply } from "../http/reply.ts";
import { decodePathSegment } from "../http/pathSegment.ts";
import { replyRoute, type TableRoute } from "../http/routeTable.ts";
import { upstreamCallbacks } from "../../shared/metrics/metrics.ts";
import { LocalBudget } from "../rateLimiter.ts";

/** A callback is a task object of a few hundred bytes; anything much larger is not one. */
const MAX_CALLBACK_BYTES = 64 * 1024;

/** The vendors that call back, and where each puts the task's id in its callback (Ark: `id`; Kling, MiniMax: `task_id`). */
const TASK_ID_FIELD: Record<string, "id" | "task_id"> = { ark: "id", kling: "task_id", minimax: "task_id" };

function providerTaskIdOf(kind: string, body: unknown): string | undefined {
  const field = TASK_ID_FIELD[kind];
  if (field === undefined || typeof body !== "object" || body === null) return undefined;
  const id = (body as Record<string, unknown>)[field];
  // MiniMax's ids are digits, sometimes sent as a number.
  const text = typeof id === "number" && Number.isSafeInteger(id) ? String(id) : id;
  return typeof text === "string" && text.length > 0 && text.length <= 200 ? text : undefined;
}

/** MiniMax checks a callback address first: it posts `{"challenge"}` and expects it back within 3 s. */
function challengeOf(kind: string, body: unknown): string | undefined {
  if (kind !== "minimax" || typeof body !== "object" || body === null) return undefined;
  const challenge = (body as { challenge?: unknown }).challenge;
  return typeof challenge === "string" && challenge.length <= 1000 ? challenge : undefined;
}

/**
 * Callbacks an edge relays to runners, a second and at once. Anyone can post one naming a made-up task (no vendor
 * signs them, and the route takes no key), and each relayed one is a NATS message to every runner: 85-110 µs of
 * the shared nats-server's CPU apiece (`bench/tools/hostileClients.ts forged-callbacks`). A vendor sends one or
 * two per task's change, far under this.
 */
export const DEFAULT_CALLBACK_HINTS = { perSecond: 200, burst: 400 } as const;

/**
 * `POST /hooks/upstream/<channel>`: an upstream says one of its tasks changed. Nothing in the body is
 * trusted (no vendor signs its callbacks): it only tells the runner hosting the task to ask the upstream now,
 * over core NATS. A lost hint costs nothing but latency: the task is polled on schedule anyway, so past the
 * edge's budget (`hints`) a callback is answered 200 like any other and relayed to no one.
 */
export function upstreamCallbackRoutes(deps: { config: ReelayConfig; nc: NatsConnection; log: Logger; hints?: LocalBudget }): TableRoute[] {
  const hints = deps.hints ?? new LocalBudget(DEFAULT_CALLBACK_HINTS.perSecond, DEFAULT_CALLBACK_HINTS.burst);
  return replyRoute(
    VIDEO_API.upstreamCallback,
    ({ request, body }) => {
      const channel = decodePathSegment(request.url.slice("/hooks/upstream/".length), "the channel name");
      const settings = Object.hasOwn(deps.config.providers, channel) ? deps.config.providers[channel] : undefined;
      if (settings === undefined || !("publicCallbackUrl" in settings) || settings.publicCallbackUrl === undefined) {
        throw new NotFoundError(`no upstream channel takes callbacks here: ${channel}`);
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse((body ?? Buffer.alloc(0)).toString("utf8"));
      } catch {
        throw new ValidationError("the callback body is not JSON");
      }
      const challenge = challengeOf(settings.kind, parsed);
      if (challenge !== undefined) return jsonReply(200, { challenge });
      const providerTaskId = providerTaskIdOf(settings.kind, parsed);
      if (providerTaskId === undefined) throw new ValidationError(`the callback names no task (${TASK_ID_FIELD[settings.kind] ?? "id"})`);
      if (!hints.take()) {
        upstreamCallbacks.inc({ outcome: "dropped" });
        return jsonReply(200, {});
      }
      upstreamCallbacks.inc({ outcome: "relayed" });
      deps.nc.publish(RUNNER_SUBJECTS.upstreamNews, JSON.stringify({ channel, providerTaskId } satisfies UpstreamNews));
      deps.log.debug({ channel, providerTaskId }, "upstream callback: the task's runner asks now");
      return jsonReply(200, {});
    },
    { maxBodyBytes: MAX_CALLBACK_BYTES },
  );
}
