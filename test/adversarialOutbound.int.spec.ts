import { createServer, type RequestListener, type Server } from "node:http";
import { mkdtempSync } from "node:fs";
import type { LookupAddress } from "node:dns";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fetchReference } from "../services/runner/providers/local/referenceFetch.ts";
import { BlockedAddressError, isPublicAddress, publicOnlyDispatcher, type Resolve } from "../services/shared/publicAddressGuard.ts";
import { deliverWebhook } from "../services/webhooks/webhookDelivery.ts";

const PNG = Buffer.from("89504e470d0a1a0a0000000d49484452000000010000000108020000009077053de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082", "hex");

/**
 * A server on 127.0.0.1 stands in for a public host (tests cannot reach the internet), so the guard under
 * test allows that one address beside the public ones; everything else is judged as in production.
 */
const PUBLIC_STAND_IN = "127.0.0.1";
const allowed = (address: string) => address === PUBLIC_STAND_IN || isPublicAddress(address);
/** The internal service an attacker wants us to reach: loopback, but another address than the stand-in. */
const INTERNAL = "127.0.0.2";

async function listen(host: string, handler: RequestListener): Promise<{ server: Server; port: number; hits: () => number }> {
  let hits = 0;
  const server = createServer((req, res) => {
    hits++;
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return { server, port: (server.address() as { port: number }).port, hits: () => hits };
}

/** A name server that answers `first` to the first question about a name and `then` to every later one. */
function rebindingResolver(first: string, then: string): Resolve & { questions: () => number } {
  let questions = 0;
  const resolve = async (): Promise<LookupAddress[]> => [{ address: questions++ === 0 ? first : then, family: 4 }];
  return Object.assign(resolve, { questions: () => questions });
}

/** Issue 32, part A: outbound requests connect only where the check allowed. */
describe("adversarial outbound requests", () => {
  let outside: Awaited<ReturnType<typeof listen>>;
  let internal: Awaited<ReturnType<typeof listen>>;

  beforeAll(async () => {
    internal = await listen(INTERNAL, (_req, res) => res.writeHead(200, { "content-type": "image/png" }).end(PNG));
    outside = await listen(PUBLIC_STAND_IN, (req, res) => {
      if (req.url === "/to-internal") return res.writeHead(302, { location: `http://${INTERNAL}:${internal.port}/secret.png` }).end();
      res.writeHead(200, { "content-type": "image/png" }).end(PNG);
    });
  });
  afterAll(async () => {
    outside?.server.close();
    internal?.server.close();
  });

  it.each([
    ["NAT64 64:ff9b::/96", "64:ff9b::7f00:1"],
    ["local-use NAT64 64:ff9b:1::/48", "64:ff9b:1::a00:1"],
    ["6to4 2002::/16", "2002:7f00:1::1"],
    ["Teredo 2001::/32", "2001::1"],
    ["benchmarking 198.18.0.0/15", "198.19.0.1"],
    ["IETF protocol assignments 192.0.0.0/24", "192.0.0.170"],
    ["documentation 192.0.2.0/24", "192.0.2.1"],
    ["reserved 240.0.0.0/4", "240.0.0.1"],
    ["IPv4-mapped loopback", "::ffff:127.0.0.1"],
    ["unique local fc00::/7", "fd12::1"],
    ["cloud metadata 169.254.169.254", "169.254.169.254"],
  ])("refuses the special-purpose range %s (%s), and the connection to it", async (_range, address) => {
    expect(isPublicAddress(address)).toBe(false);
    const host = address.includes(":") ? `[${address}]` : address;
    await expect(request(`http://${host}/`, { dispatcher: publicOnlyDispatcher() })).rejects.toBeInstanceOf(BlockedAddressError);
  });

  it("DNS rebinding: a name that answers a public address first and a loopback one second never reaches loopback", async () => {
    const target = `http://rebind.test:${internal.port}/secret.png`;
    // The attack, as the check-then-connect guard met it: the check asked once, the connection asked again.
    const attack = rebindingResolver(PUBLIC_STAND_IN, INTERNAL);
    const looked = await attack("rebind.test");
    expect(looked.every((entry) => allowed(entry.address))).toBe(true);
    const naive = new Agent({
      connect: {
        lookup: (host, options, callback) =>
          void attack(host).then((entries) => (options.all ? callback(null, [...entries]) : callback(null, entries[0]?.address ?? "", 4))),
      },
    });
    const before = internal.hits();
    const leaked = await request(target, { dispatcher: naive });
    await leaked.body.dump();
    expect(internal.hits()).toBe(before + 1);
    await naive.close();

    // The guard resolves once per connection and connects to what it checked.
    const resolver = rebindingResolver(PUBLIC_STAND_IN, INTERNAL);
    const guarded = publicOnlyDispatcher({ resolve: resolver, allowed });
    const answer = await request(`http://rebind.test:${outside.port}/`, { dispatcher: guarded });
    await answer.body.dump();
    expect(resolver.questions()).toBe(1);
    // A later connection that gets the loopback answer is refused at connect time.
    await expect(request(target, { dispatcher: guarded })).rejects.toBeInstanceOf(BlockedAddressError);
    expect(internal.hits()).toBe(before + 1);
  });

  it("every redirect hop is checked again: a public reference that redirects inside is refused and says why", async () => {
    const dir = mkdtempSync(join(tmpdir(), "reelay-adversarial-"));
    const dispatcher = publicOnlyDispatcher({ allowed });
    const before = internal.hits();
    await expect(fetchReference(`http://${PUBLIC_STAND_IN}:${outside.port}/to-internal`, dir, 1_000_000, undefined, dispatcher)).rejects.toThrow(
      new RegExp(`could not fetch image_url: ${INTERNAL.replaceAll(".", "\\.")} is a private or local address`),
    );
    expect(internal.hits()).toBe(before);
    expect(await fetchReference(`http://${PUBLIC_STAND_IN}:${outside.port}/red.png`, dir, 1_000_000, undefined, dispatcher)).toMatch(/\.png$/);
  });

  it("webhooks go through the same guard: a callback on a name resolving to loopback is never called", async () => {
    const before = internal.hits();
    const attempt = await deliverWebhook({ url: `http://localhost:${internal.port}/hook`, id: "msg_1", body: "{}", secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"] }, { timeoutMs: 2000, allowPrivateAddresses: false });
    expect(attempt).toMatchObject({ delivered: false, error: expect.stringMatching(/private or local address/) });
    expect(internal.hits()).toBe(before);
  });
});
