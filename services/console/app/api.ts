/**
 * The console's one way to the admin API: the admin token from session storage as a Bearer header (no
 * cookies, so no CSRF), JSON in and out, the API's `{"error": {"message"}}` surfaced as an Error.
 */

const TOKEN_KEY = "reelay-admin-token";
export const API = "/admin/v1";

export const storedToken = (): string | null => sessionStorage.getItem(TOKEN_KEY);
export const storeToken = (token: string): void => sessionStorage.setItem(TOKEN_KEY, token);
export const forgetToken = (): void => sessionStorage.removeItem(TOKEN_KEY);

/** Thrown for a 401: the console goes back to sign-in. */
export class SignedOut extends Error {}

export async function api<T>(path: string, options: { method?: string; body?: unknown } = {}): Promise<T> {
  const answer = await fetch(`${API}${path}`, {
    method: options.method ?? "GET",
    headers: { authorization: `Bearer ${storedToken() ?? ""}`, ...(options.body === undefined ? {} : { "content-type": "application/json" }) },
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
  });
  if (answer.status === 401) {
    forgetToken();
    // The server's words say why (a customer API key is told it is one).
    const refusal = ((await answer.json().catch(() => ({}))) as { error?: { message?: string } }).error?.message;
    throw new SignedOut(refusal ?? "the admin token was refused");
  }
  const data = (await answer.json()) as T & { error?: { message: string } };
  if (!answer.ok) throw new Error(data.error?.message ?? `HTTP ${answer.status}`);
  return data;
}

/**
 * Follows `GET /admin/v1/events` (every task and ledger event) with fetch, since EventSource cannot send the
 * Authorization header. Calls `onEvent` per event; reconnects after a drop until `stop` is called.
 */
export function followEvents(onEvent: (kind: string, data: { type: string; meta?: { taskId?: number } }) => void): () => void {
  const controller = new AbortController();
  const run = async (): Promise<void> => {
    while (!controller.signal.aborted) {
      try {
        const answer = await fetch(`${API}/events`, { headers: { authorization: `Bearer ${storedToken() ?? ""}` }, signal: controller.signal });
        if (!answer.ok || !answer.body) throw new Error(`HTTP ${answer.status}`);
        const reader = answer.body.getReader();
        const decoder = new TextDecoder();
        let buffered = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffered += decoder.decode(value, { stream: true });
          let end = buffered.indexOf("\n\n");
          while (end !== -1) {
            const frame = buffered.slice(0, end);
            buffered = buffered.slice(end + 2);
            const kind = /^event: (.+)$/m.exec(frame)?.[1];
            const data = /^data: (.+)$/m.exec(frame)?.[1];
            if (kind && data) onEvent(kind, JSON.parse(data) as { type: string });
            end = buffered.indexOf("\n\n");
          }
        }
      } catch {
        // Dropped or refused: try again shortly (the stream has no history to lose; views refetch).
      }
      if (!controller.signal.aborted) await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  };
  void run();
  return () => controller.abort();
}
