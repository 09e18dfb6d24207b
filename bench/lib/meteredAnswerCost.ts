import { IncomingMessage } from "node:http";
import { Socket } from "node:net";
import { answered, MeteredResponse, meterAnswer, RouteMeterTable } from "../../services/edge/http/answerMeter.ts";

const ANSWERS = 1_000_000;
const ROUNDS = 4;

/**
 * What the edge's per-request metrics cost, alone: making a response object with and without what an
 * answered request does to metrics (route meters looked up, the answer counted and timed), in this process.
 * Served edges measured side by side differ by more than this from run to run (an A/A run, both edges with
 * metrics off, read 1.02–1.06), so the isolated cost is what is compared with the request's CPU.
 * Returns nanoseconds per answer, with and without, the lowest of alternating rounds.
 */
export function meteredAnswerCost(): { onNs: number; offNs: number } {
  const table = new RouteMeterTable();
  const req = new IncomingMessage(new Socket());
  const round = (metered: boolean): number => {
    const started = process.hrtime.bigint();
    for (let i = 0; i < ANSWERS; i++) {
      const res = new MeteredResponse(req);
      res.statusCode = 200;
      if (metered) {
        meterAnswer(res, table.of("/api/compat/videosTask"), performance.now());
        answered(res);
      }
    }
    return Number(process.hrtime.bigint() - started) / ANSWERS;
  };
  let onNs = Number.POSITIVE_INFINITY;
  let offNs = Number.POSITIVE_INFINITY;
  for (let i = 0; i < ROUNDS; i++) {
    offNs = Math.min(offNs, round(false));
    onNs = Math.min(onNs, round(true));
  }
  return { onNs, offNs };
}
