import { RateLimitedError, ServiceUnavailableError } from "../../shared/errors.ts";

export interface BodyBudgetLimits {
  /** Bytes of bodies held at once, all holders together. */
  totalBytes: number;
  /** Bytes one holder (an account) may hold of them. */
  perHolderBytes: number;
}

const MIB = 1024 * 1024;
const inMiB = (bytes: number): string => `${Math.round((bytes / MIB) * 10) / 10} MiB`;

/**
 * The request bodies an edge holds in memory at once, bounded in all and per holder (an account). A body is read
 * whole before its handler runs, and a client may send it as slowly as the request timeout allows: without a
 * bound, clients holding large bodies (10 MB uploads, sent up to the last byte) held the edge's memory, 10 MB
 * each. A holder over its share is refused (429: its own requests are too many); the edge over its whole budget,
 * 503: try again shortly.
 */
export class BodyBudget {
  private total = 0;
  private readonly byHolder = new Map<string, number>();

  constructor(private readonly limits: BodyBudgetLimits) {}

  /**
   * Holds `bytes` for `holder`; the function returned lets them go (once). Throws when there is no room. A body
   * alone always has room (a share smaller than the largest body would refuse it for ever).
   */
  hold(holder: string, bytes: number): () => void {
    const held = this.byHolder.get(holder) ?? 0;
    if (held > 0 && held + bytes > this.limits.perHolderBytes) {
      throw new RateLimitedError(`the request bodies this account (or, without a key, every caller without one) is sending to this edge would exceed ${inMiB(this.limits.perHolderBytes)}; send fewer at once`);
    }
    if (this.total > 0 && this.total + bytes > this.limits.totalBytes) throw new ServiceUnavailableError("the edge is reading too many request bodies at once; try again shortly", 1);
    this.byHolder.set(holder, held + bytes);
    this.total += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.total -= bytes;
      const left = (this.byHolder.get(holder) ?? bytes) - bytes;
      if (left <= 0) this.byHolder.delete(holder);
      else this.byHolder.set(holder, left);
    };
  }

  /** Bytes held now, in all. */
  get heldBytes(): number {
    return this.total;
  }
}
