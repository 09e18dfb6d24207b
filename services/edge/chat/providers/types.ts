import type { ChatUsage } from "../../../../contracts/chat.ts";
import type { ChatRequest } from "../chatRequest.ts";
import type { RelayedContent } from "../relayedContent.ts";
import type { ResponseSink } from "../responseSink.ts";

/**
 * One way of answering chat requests. A provider writes the whole answer (reply or stream) to the sink
 * and resolves with the upstream's usage, or undefined when none is known (client left, stream broke, the
 * upstream omitted it). Whatever reaches the client goes into `relayed` as well, which is billed when there
 * is no usage. It throws a ReelayError for anything the client should see as an error status.
 */
export interface ChatProvider {
  complete(request: ChatRequest, sink: ResponseSink, relayed: RelayedContent): Promise<ChatUsage | undefined>;
}
