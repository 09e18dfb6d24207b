import { RateLimitedError } from "../shared/errors.ts";

/**
 * How many of one kind of long request (event streams, chat relays) each account has open on this edge, bounded:
 * a tenant opening thousands (each a socket, its buffers and timers, and for chat an upstream connection on a
 * key every tenant shares) cannot take the edge's or the upstream's capacity from the others. `enter` counts a
 * request in, or refuses it (429, `refusal` says why and what to do); the function it returns counts it out, once.
 */
export class InFlightPerAccount {
  private readonly open = new Map<string, number>();

  constructor(
    private readonly limit: number,
    private readonly refusal: (limit: number) => string,
  ) {}

  enter(account: string): () => void {
    const count = this.open.get(account) ?? 0;
    if (count >= this.limit) throw new RateLimitedError(this.refusal(this.limit));
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
