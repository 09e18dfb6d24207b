import { lookup } from "node:dns/promises";
import { BlockList, isIP } from "node:net";

/**
 * Customer-given URLs (reference images, vendor results, webhook callbacks) are fetched from inside our
 * network. Without this check a customer could make us read internal services (SSRF): loopback, private, link-local (cloud metadata),
 * carrier-grade NAT and unique-local addresses are refused, for the URL and for every redirect hop.
 * (A name that resolves differently between this check and the connection is not caught.)
 */
const PRIVATE = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
  ["224.0.0.0", 3],
] as const) {
  PRIVATE.addSubnet(network, prefix, "ipv4");
}
// (IPv4-mapped IPv6 addresses, ::ffff:a.b.c.d, are matched against the IPv4 rules by BlockList itself.)
for (const [network, prefix] of [
  ["::", 127],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const) {
  PRIVATE.addSubnet(network, prefix, "ipv6");
}

export async function assertPublicAddress(url: URL): Promise<void> {
  const host = url.hostname.replace(/^\[|\]$/g, "");
  const literal = isIP(host);
  const addresses = literal ? [{ address: host, family: literal }] : await lookup(host, { all: true });
  for (const { address, family } of addresses) {
    if (PRIVATE.check(address, family === 6 ? "ipv6" : "ipv4")) {
      throw new Error(`${url.hostname} is a private or local address; reference URLs must be public`);
    }
  }
}
