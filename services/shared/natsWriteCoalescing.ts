import type { NatsConnection } from "@nats-io/transport-node";

/**
 * Makes a connection write to its socket once per event-loop turn instead of once per microtask.
 *
 * nats.js queues each command in an outbound buffer and flushes it with `queueMicrotask`, so every async
 * step that publishes, requests or acks (most of reelay's steps do one) costs its own `write` system call. On
 * this machine those calls were 15–27% of the edge, runner and projector threads' CPU under a create load.
 * Flushing from `setImmediate` instead joins every command issued in one turn into one write: creates
 * accepted per second went from 436–447 to 628–632 (bench/tools/createProfile.ts --no-profile). The added
 * latency is the rest of the current turn. Other NATS clients coalesce the same way (nats.rs flushes on a
 * 1 ms interval, nats.py every 5 ms).
 *
 * This replaces one method of the client's internal protocol handler (nats-core 3.4, pinned): if that shape
 * changes, nothing is replaced and the connection keeps the client's own flushing (`false` is returned;
 * test/natsWriteCoalescing.int.spec.ts fails so an upgrade is noticed).
 */
export function coalesceWrites(nc: NatsConnection): boolean {
  const protocol = (nc as unknown as { protocol?: Partial<ProtocolHandler> }).protocol;
  if (!isProtocolHandler(protocol)) return false;
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    protocol.flushPending();
  };
  const encoder = new TextEncoder();
  protocol.sendCommand = (command: string | Uint8Array, ...payloads: Uint8Array[]) => {
    protocol.outbound.fill(typeof command === "string" ? encoder.encode(command) : command, ...payloads);
    // As the client does: a full buffer goes out at once.
    if (protocol.outbound.size() >= protocol.pendingLimit) return protocol.flushPending();
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
  return true;
}

/** The parts of nats-core's ProtocolHandler this relies on. */
interface ProtocolHandler {
  sendCommand(command: string | Uint8Array, ...payloads: Uint8Array[]): void;
  flushPending(): void;
  outbound: { fill(buffer: Uint8Array, ...payloads: Uint8Array[]): void; size(): number };
  pendingLimit: number;
}

function isProtocolHandler(value: Partial<ProtocolHandler> | undefined): value is ProtocolHandler {
  return (
    typeof value?.sendCommand === "function" &&
    typeof value.flushPending === "function" &&
    typeof value.outbound?.fill === "function" &&
    typeof value.outbound.size === "function" &&
    typeof value.pendingLimit === "number"
  );
}
