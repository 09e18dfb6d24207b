import { ServerResponse, type IncomingMessage } from "node:http";
import type { HotCounterChild, HotHistogramChild } from "../../shared/metrics/hotMetrics.ts";
import { httpRequestDuration, httpRequests } from "../../shared/metrics/metrics.ts";

/** The metric children of one route, made once (prom-client hashes a label object on every `inc(labels)`). */
export interface RouteMeters {
  duration: HotHistogramChild;
  /** The counter of one status code. */
  count(status: number): HotCounterChild;
}

/**
 * The edge's response class (node:http's `ServerResponse` option): carries its route's meters, so an answer
 * is counted without a listener or a side table per request (a WeakMap entry per request cost GC time).
 */
export class MeteredResponse<Request extends IncomingMessage = IncomingMessage> extends ServerResponse<Request> {
  meters: RouteMeters | undefined;
  started = 0;
}

export function meterAnswer(res: ServerResponse, meters: RouteMeters, started: number): void {
  if (!(res instanceof MeteredResponse)) return;
  res.meters = meters;
  res.started = started;
}

/** Counts and times the answer; called by every writer of answers (replies, stream ends), once. */
export function answered(res: ServerResponse): void {
  if (!(res instanceof MeteredResponse) || !res.meters) return;
  const { meters, started } = res;
  res.meters = undefined;
  meters.count(res.statusCode).inc();
  meters.duration.observe((performance.now() - started) / 1000);
}

/**
 * The meters of each route, made once (hotMetrics.ts): resolving labels per request cost more than the rest
 * of a cached query answer. Routes are the registered patterns, so the table is bounded.
 */
export class RouteMeterTable {
  private readonly byRoute = new Map<string, RouteMeters>();

  of(route: string): RouteMeters {
    let meters = this.byRoute.get(route);
    if (!meters) {
      const codes = new Map<number, HotCounterChild>();
      meters = {
        duration: httpRequestDuration.labels({ route }),
        count: (status) => {
          let counter = codes.get(status);
          if (!counter) codes.set(status, (counter = httpRequests.labels({ route, code: String(status) })));
          return counter;
        },
      };
      this.byRoute.set(route, meters);
    }
    return meters;
  }
}
