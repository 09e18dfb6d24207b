/** A spec-following client for the video endpoints, as a customer would write it. */
export interface Envelope {
  code: number;
  msg: string;
  data?: Record<string, unknown>;
}

export class VideoClient {
  constructor(private readonly baseUrl: string, private readonly key: string) {}

  async create(body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: Envelope }> {
    const response = await fetch(`${this.baseUrl}/api/compat/videosGenerations`, {
      method: "POST",
      headers: { authorization: `Bearer ${this.key}`, "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Envelope };
  }

  async query(id: string | number): Promise<{ status: number; body: Envelope }> {
    const response = await fetch(`${this.baseUrl}/api/compat/videosTask?id=${id}`, {
      headers: { authorization: `Bearer ${this.key}` },
    });
    return { status: response.status, body: (await response.json()) as Envelope };
  }

  /** Polls until the task is final (success or failed), as the spec's polling procedure says. */
  async waitForFinal(id: number, timeoutMs = 60_000, intervalMs = 100): Promise<{ status: number; body: Envelope }> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const answer = await this.query(id);
      const status = answer.body.data?.status;
      // 503 says "try again shortly" (NATS reconnecting after a server restart): a client polls on.
      const passing = answer.status === 503 && Date.now() < deadline;
      if (!passing && (answer.status !== 200 || status === "success" || status === "failed")) return answer;
      if (Date.now() > deadline) throw new Error(`task ${id} still ${String(status)} after ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }
}
