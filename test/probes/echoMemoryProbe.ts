/**
 * Runs in a child process of test/echoMemory.unit.spec.ts (a clean heap, no test runner around it):
 * streams several 1 MiB echo answers at once into slow sinks that apply backpressure, samples the heap
 * at every write and prints the peak growth over the starting heap, in bytes, as JSON.
 */
import { RelayedContent } from "../../services/edge/chat/relayedContent.ts";
import { EchoProvider } from "../../services/edge/chat/providers/echo/echoProvider.ts";
import type { ChatRequest } from "../../services/edge/chat/chatRequest.ts";
import type { ResponseSink } from "../../services/edge/chat/responseSink.ts";

const STREAMS = Number(process.argv[2] ?? 4);
const MESSAGE_BYTES = 1024 * 1024;
/** What a socket buffers before write() says "slow down". */
const HIGH_WATER = 64 * 1024;

const gc = (globalThis as { gc?: () => void }).gc;
gc?.();
const baseline = process.memoryUsage().heapUsed;
let peak = 0;
const sample = () => (peak = Math.max(peak, process.memoryUsage().heapUsed - baseline));

/** A client that reads 64 KiB per turn of the event loop: every write beyond that waits for a drain. */
class SlowSink implements ResponseSink {
  readonly requestId = `req_probe${Math.random().toString(16).slice(2)}`;
  open = true;
  streaming = false;
  bytes = 0;
  private buffered = 0;
  private drain: (() => void) | undefined;
  onAbort(): void {}
  reply(): void {
    throw new Error("the probe streams");
  }
  write(chunk: string | Uint8Array): boolean {
    sample();
    this.streaming = true;
    this.bytes += chunk.length;
    this.buffered += chunk.length;
    if (this.buffered < HIGH_WATER) return true;
    setImmediate(() => {
      this.buffered = 0;
      const resume = this.drain;
      this.drain = undefined;
      resume?.();
    });
    return false;
  }
  onDrain(resume: () => void): void {
    this.drain = resume;
  }
  end(last?: string | Uint8Array): void {
    sample();
    this.bytes += last?.length ?? 0;
    this.open = false;
  }
}

const request = (): ChatRequest => {
  // One-letter words: the worst case for a word-per-event stream.
  const text = "a ".repeat(MESSAGE_BYTES / 2);
  const messages = [{ role: "user", content: text }];
  return { body: { model: "echo", messages, stream: true }, model: "echo", messages, stream: true, clientWantsUsage: true, maxAnswerTokens: undefined };
};

const sinks = Array.from({ length: STREAMS }, () => new SlowSink());
const echo = new EchoProvider();
const usages = await Promise.all(sinks.map((sink) => echo.complete(request(), sink, new RelayedContent())));
process.stdout.write(
  JSON.stringify({ peakHeapGrowth: peak, bytes: sinks.map((sink) => sink.bytes), words: usages.map((usage) => usage?.completion_tokens) }),
);
