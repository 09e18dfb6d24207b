import { lookup, type LookupAddress } from "node:dns";
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";
import { Agent, buildConnector, type Dispatcher } from "undici";

/**
 * Customer-given URLs (reference images, vendor results, webhook callbacks) are fetched from inside our
 * network. Without a guard a customer could make us read internal services (SSRF). Only global unicast
 * addresses are let through: ipaddr.js's `range()` names every IANA special-purpose block (loopback,
 * private, link-local with the cloud metadata address, carrier-grade NAT, benchmarking 198.18.0.0/15,
 * IETF protocol assignments 192.0.0.0/24, documentation, NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo,
 * multicast, …), and an IPv4-mapped IPv6 address is judged as the IPv4 address it carries.
 */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.process(address);
  return parsed.range() === "unicast";
}

/** A connection refused because the address it would reach is not public. */
export class BlockedAddressError extends Error {
  readonly code = "REELAY_BLOCKED_ADDRESS";
}

const blocked = (host: string, address: string) =>
  new BlockedAddressError(address === host ? `${host} is a private or local address; only public addresses are fetched` : `${host} resolves to ${address}, a private or local address; only public addresses are fetched`);

/** `dns.lookup` with every answer: what net.connect would use. */
export type Resolve = (host: string) => Promise<readonly LookupAddress[]>;

const systemResolve: Resolve = (host) =>
  new Promise((resolve, reject) => lookup(host, { all: true }, (error, addresses) => (error ? reject(error) : resolve(addresses))));

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for net.connect that resolves once and hands the connection only addresses it checked, so
 * what is checked is what is connected to: a name that answers a public address to a check and a
 * private one to the connection right after (DNS rebinding) has no second answer to give. A name with
 * any non-public answer is refused whole.
 */
function checkedLookup(resolve: Resolve, allowed: (address: string) => boolean) {
  return (host: string, options: { all?: boolean }, callback: LookupCallback): void => {
    resolve(host).then(
      (addresses) => {
        const bad = addresses.find((entry) => !allowed(entry.address));
        if (bad || addresses.length === 0) return callback(blocked(host, bad?.address ?? "no address"), "");
        if (options.all) return callback(null, [...addresses]);
        const [first] = addresses as [LookupAddress];
        callback(null, first.address, first.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, ""),
    );
  };
}

/**
 * An undici dispatcher whose every connection (each redirect hop is one, or reuses one checked before)
 * reaches a public address only: a literal address is checked as it is, a name is resolved once by the
 * checked lookup. `resolve` and `allowed` are seams for tests; production uses the system resolver and
 * `isPublicAddress`.
 */
export function publicOnlyDispatcher(options: { resolve?: Resolve; allowed?: (address: string) => boolean } = {}): Dispatcher {
  const allowed = options.allowed ?? isPublicAddress;
  const connect = buildConnector({ lookup: checkedLookup(options.resolve ?? systemResolve, allowed) });
  return new Agent({
    connect: (connectOptions, callback) => {
      // net.connect does not look a literal address up: it is judged here.
      const host = connectOptions.hostname.replace(/^\[|\]$/g, "");
      if (isIP(host) !== 0 && !allowed(host)) return callback(blocked(host, host), null);
      return connect(connectOptions, callback);
    },
  });
}

let shared: Dispatcher | undefined;
/** The process's one public-only dispatcher (its pooled connections were all checked when made). */
export const publicOnly = (): Dispatcher => (shared ??= publicOnlyDispatcher());
