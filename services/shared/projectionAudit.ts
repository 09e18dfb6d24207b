import { isDeepStrictEqual } from "node:util";
import type { KV } from "@nats-io/kv";
import type { Nats } from "./nats.ts";
import type { Projection } from "./projection.ts";
import { replayProjection } from "./projectionReplay.ts";

export interface ProjectionDifference {
  key: string;
  live: unknown;
  replayed: unknown;
}

export interface ProjectionAudit {
  projection: string;
  events: number;
  documents: number;
  seconds: number;
  differences: ProjectionDifference[];
}

async function liveDocuments(bucket: KV): Promise<Map<string, unknown>> {
  const docs = new Map<string, unknown>();
  for await (const key of await bucket.keys()) {
    const entry = await bucket.get(key);
    if (entry && entry.operation === "PUT") docs.set(key, entry.json());
  }
  return docs;
}

/**
 * Rebuilds a read model from its stream and compares it, document by document, with the live one.
 * With `into`, the rebuilt documents are also written to that (fresh) bucket, ready to swap in.
 */
export async function auditProjection<Event, Doc>(
  nats: Nats,
  projection: Projection<Event, Doc>,
  live: KV,
  into?: KV,
): Promise<ProjectionAudit> {
  const started = performance.now();
  const { docs, events } = await replayProjection(nats.js, nats.jsm, projection);
  const seconds = (performance.now() - started) / 1000;
  if (into) await Promise.all([...docs].map(([key, doc]) => into.put(key, JSON.stringify(doc))));
  const current = await liveDocuments(live);
  const differences: ProjectionDifference[] = [];
  for (const key of new Set([...docs.keys(), ...current.keys()])) {
    // Compare as stored (JSON), so `undefined` fields and key order don't count as differences.
    const replayed = docs.has(key) ? JSON.parse(JSON.stringify(docs.get(key))) : undefined;
    if (!isDeepStrictEqual(replayed, current.get(key))) differences.push({ key, live: current.get(key), replayed });
  }
  return { projection: projection.name, events, documents: docs.size, seconds, differences };
}
