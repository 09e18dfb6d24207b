import { request } from "undici";
import { Webhook } from "standardwebhooks";
import { publicOnly } from "../shared/publicAddressGuard.ts";

/** One webhook to send: Standard Webhooks' id, the body, and the secrets to sign it with. */
export interface WebhookMessage {
  url: string;
  /** Stable per event (`task-<id>-v<version>`): a receiver drops a repeat by it. */
  id: string;
  body: string;
  secrets: readonly string[];
}

export interface DeliveryAttempt {
  delivered: boolean;
  status?: number;
  error?: string;
  durationMs: number;
}

/**
 * Signs (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>` per secret, as
 * the Standard Webhooks specification says) and POSTs once. A 2xx is delivered; anything else, a redirect
 * included (a receiver must answer itself), is a failure to retry. Never throws.
 */
export async function deliverWebhook(message: WebhookMessage, options: { timeoutMs: number; allowPrivateAddresses: boolean }): Promise<DeliveryAttempt> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  try {
    const url = new URL(message.url);
    const timestamp = new Date();
    const signature = message.secrets.map((secret) => new Webhook(secret).sign(message.id, timestamp, message.body)).join(" ");
    const response = await request(url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "reelay-webhooks",
        "webhook-id": message.id,
        "webhook-timestamp": String(Math.floor(timestamp.getTime() / 1000)),
        "webhook-signature": signature,
      },
      body: message.body,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      signal: AbortSignal.timeout(options.timeoutMs),
      // Connections reach public addresses only, checked on the address connected to (no rebinding window).
      ...(options.allowPrivateAddresses ? {} : { dispatcher: publicOnly() }),
    });
    await response.body.dump();
    const delivered = response.statusCode >= 200 && response.statusCode < 300;
    return { delivered, status: response.statusCode, durationMs: elapsed() };
  } catch (error) {
    return { delivered: false, error: (error as Error).message, durationMs: elapsed() };
  }
}

/** The pause before attempt `attempt + 1`: doubling from `firstMs`, capped at `maxMs`, with jitter so receivers coming back are not hit all at once. */
export function backoffMs(attempt: number, firstMs: number, maxMs: number, random = Math.random): number {
  const base = Math.min(maxMs, firstMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(base * (0.5 + random() / 2));
}
