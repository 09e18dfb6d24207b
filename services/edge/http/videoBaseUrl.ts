import { BlockList, isIP } from "node:net";
import type { RequestInfo } from "./request.ts";

/** A host as a client may name it: a DNS name or IPv4 address with an optional port, or a bracketed IPv6 one. */
const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?$/;
const MAX_HOST_LENGTH = 255;

const validHost = (host: string): boolean => host.length > 0 && host.length <= MAX_HOST_LENGTH && HOST.test(host);

/** `REELAY_TRUSTED_PROXIES`: addresses and CIDR ranges whose X-Forwarded-Proto/-Host are believed. */
export function trustedProxies(list: readonly string[]): BlockList {
  const blocks = new BlockList();
  for (const entry of list) {
    const [address = "", prefix] = entry.split("/");
    const family = isIP(address) === 6 ? "ipv6" : "ipv4";
    if (prefix === undefined) blocks.addAddress(address, family);
    else blocks.addSubnet(address, Number(prefix), family);
  }
  return blocks;
}

const isTrusted = (blocks: BlockList, peer: string): boolean => {
  const address = peer.startsWith("::ffff:") ? peer.slice(7) : peer;
  const family = isIP(address);
  return family !== 0 && blocks.check(address, family === 6 ? "ipv6" : "ipv4");
};

/**
 * The value the proxy in front of us set: proxies that add to a forwarded header append, so the last entry
 * is the trusted proxy's and the first may be whatever the client sent.
 */
const nearestHop = (value: string): string => value.slice(value.lastIndexOf(",") + 1).trim();

/**
 * Where video addresses in answers point. `REELAY_PUBLIC_URL` when set (the only way that ignores every
 * header). Otherwise the Host the client used; behind a proxy in `REELAY_TRUSTED_PROXIES`, its
 * X-Forwarded-Proto and X-Forwarded-Host. Header values that are not a plain host (or http/https) are
 * ignored, so a client cannot make the address any string, nor make caches keyed by it grow without bound.
 */
export function videoBaseUrl(options: { publicUrl: string | undefined; trusted: BlockList | undefined; fallbackHost: () => string }) {
  const { publicUrl, trusted, fallbackHost } = options;
  if (publicUrl) {
    const fixed = publicUrl.replace(/\/+$/, "");
    return (): string => fixed;
  }
  return (request: RequestInfo): string => {
    const host = request.header("host");
    const ownHost = validHost(host) ? host : fallbackHost();
    if (trusted && isTrusted(trusted, request.peer)) {
      const forwardedProto = nearestHop(request.header("x-forwarded-proto"));
      const forwardedHost = nearestHop(request.header("x-forwarded-host"));
      const proto = forwardedProto === "https" || forwardedProto === "http" ? forwardedProto : "http";
      return `${proto}://${validHost(forwardedHost) ? forwardedHost : ownHost}`;
    }
    return `http://${ownHost}`;
  };
}
