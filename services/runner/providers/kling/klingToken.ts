import { randomUUID } from "node:crypto";
import { SignJWT } from "jose";

/** Kling's documented lifetime for a token: `exp = now + 1800`, `nbf = now - 5` (seconds). */
const LIFETIME_SECONDS = 1800;
const NOT_BEFORE_SKEW_SECONDS = 5;
/** A token is signed anew this long before it expires, so no call carries one about to lapse. */
const RENEW_BEFORE_SECONDS = 300;

/**
 * The JWT every Kling call carries (vendors doc E1.1): HS256 over `{iss: access key, exp, nbf}`, signed with
 * the secret key, with `jose`. One token serves calls until five minutes before it expires. A random `jti`
 * makes each signing distinct, so a token Kling refused as expired (code 1004) is never sent again.
 */
export class KlingToken {
  private current: { token: string; expiresAt: number } | undefined;
  private readonly secret: Uint8Array;

  constructor(
    private readonly accessKey: string,
    secretKey: string,
    private readonly now: () => number = () => Date.now() / 1000,
  ) {
    this.secret = new TextEncoder().encode(secretKey);
  }

  async bearer(): Promise<string> {
    const now = this.now();
    if (!this.current || now >= this.current.expiresAt - RENEW_BEFORE_SECONDS) {
      const issued = Math.floor(now);
      const expiresAt = issued + LIFETIME_SECONDS;
      const token = await new SignJWT({})
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .setIssuer(this.accessKey)
        .setExpirationTime(expiresAt)
        .setNotBefore(issued - NOT_BEFORE_SKEW_SECONDS)
        .setJti(randomUUID())
        .sign(this.secret);
      this.current = { token, expiresAt };
    }
    return this.current.token;
  }

  /** Kling said the token expired (clocks disagree): the next call signs a new one. */
  renew(): void {
    this.current = undefined;
  }
}
