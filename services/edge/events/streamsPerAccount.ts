import { RateLimitedError } from "../../shared/errors.ts";

/**
 * How many event streams each account has open on this edge, bounded: a tenant opening thousands of streams
 * (each a socket, a keep-alive timer and a listener on the task log's feed) cannot take the edge's capacity
 * from the others. `open` counts a stream in, or refuses it (429); the function it returns counts it out.
 */
export class StreamsPerAccount {
  private readonly open = new Map<string, number>();

  constructor(private readonly limit: number) {}

  enter(account: string): () => void {
    const count = this.open.get(account) ?? 0;
    if (count >= this.limit) {
      throw new RateLimitedError(`too many event streams open for this account (at most ${this.limit} per edge): close one, or follow the whole account with /api/compat/videosTasks/events`);
    }
    this.open.set(account, count + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const now = (this.open.get(account) ?? 1) - 1;
      if (now === 0) this.open.delete(account);
      else this.open.set(account, now);
    };
  }
}
