import type { ChatUsage } from "../../../../contracts/chat.ts";
import type { ChatRequest } from "../chatRequest.ts";
import type { ResponseSink } from "../responseSink.ts";

/**
 * One way of answering chat requests. A provider writes the whole answer (reply or stream) to the sink
 * and resolves with the usage to bill, or undefined when none is known (client left, stream broke).
 * It throws a ReelayError for anything the client should see as an error status.
 */
export interface ChatProvider {
  complete(request: ChatRequest, sink: ResponseSink): Promise<ChatUsage | undefined>;
}
