import { isIP } from "node:net";
import { z } from "zod";

const blankAsUnset = (value: unknown) => (value === "" ? undefined : value);
const optional = <T extends z.ZodType>(schema: T) => z.preprocess(blankAsUnset, schema.optional());

function isAddressOrRange(entry: string): boolean {
  const [address = "", prefix, extra] = entry.split("/");
  const family = isIP(address);
  if (family === 0 || extra !== undefined) return false;
  if (prefix === undefined) return true;
  const bits = Number(prefix);
  return /^\d{1,3}$/.test(prefix) && bits <= (family === 6 ? 128 : 32);
}

const PORT_TEXT = "must be a port number from 0 to 65535";
const isPort = (text: string): boolean => /^\d{1,5}$/.test(text) && Number(text) <= 65_535;
/** A port as an operator writes it; zod's own words for "eighty" were "expected number, received NaN". */
const portNumber = z.string().trim().refine(isPort, PORT_TEXT).transform(Number);
const portOrOff = z
  .string()
  .trim()
  .refine((text) => text === "off" || isPort(text), `${PORT_TEXT}, or "off"`)
  .transform((text) => (text === "off" ? ("off" as const) : Number(text)));

const natsUrl = z
  .string()
  .refine((list) => list.split(",").every((url) => /^(nats|tls|ws|wss):\/\/[^\s,]+$/.test(url.trim())), "must be nats://host:port, or several separated by commas");

/**
 * The environment reelay reads, parsed like the config file: a bad value stops start-up with the
 * variable named, instead of becoming NaN or an address nobody asked for.
 */
export const ReelayEnvironment = z.object({
  PORT: z.preprocess(blankAsUnset, portNumber.default(8080)),
  HOST: z.preprocess(blankAsUnset, z.string().min(1).default("127.0.0.1")),
  NATS_URL: optional(natsUrl),
  REELAY_DATA_DIR: z.preprocess(blankAsUnset, z.string().min(1).default(".data")),
  REELAY_CONFIG: optional(z.string().min(1)),
  REELAY_PUBLIC_URL: optional(z.url({ protocol: /^https?$/, error: "must be an http(s) URL such as https://video.example.com" })),
  /** Proxies (addresses or CIDR ranges, comma-separated) whose X-Forwarded-Proto/-Host build video addresses. */
  REELAY_TRUSTED_PROXIES: z.preprocess(
    blankAsUnset,
    z
      .string()
      .transform((list) => list.split(",").map((entry) => entry.trim()).filter((entry) => entry !== ""))
      .pipe(z.array(z.string().refine(isAddressOrRange, { error: (issue) => `${JSON.stringify(issue.input)} is not an IP address or a CIDR range such as 10.0.0.0/8` })))
      .default([]),
  ),
  /** JetStream keeps at most 5 copies of a stream. */
  REELAY_REPLICAS: z.preprocess(
    blankAsUnset,
    z
      .string()
      .trim()
      .refine((text) => /^[1-5]$/.test(text), "must be a number of copies from 1 to 5 (JetStream's replicas)")
      .transform(Number)
      .default(1),
  ),
  /** A port of its own for GET /metrics (0: any free port); unset: metrics only on the edge, to loopback clients. */
  REELAY_METRICS_PORT: optional(portNumber),
  /** `off`: no per-request HTTP metrics and no chat first-chunk timing (to measure what they cost; see bench). */
  REELAY_METRICS: z.preprocess(blankAsUnset, z.enum(["on", "off"]).default("on")),
  REELAY_METRICS_HOST: z.preprocess(blankAsUnset, z.string().min(1).default("127.0.0.1")),
  /**
   * The two replaced methods of the NATS client (services/shared/nats.ts): both unless set; `none` or the one to
   * keep, so the bench can measure what each pays against the client as shipped (bench/suites/natsClientPatches.ts).
   */
  REELAY_NATS_PATCHES: z.preprocess(blankAsUnset, z.enum(["both", "none", "coalesce-writes", "settled-requests"]).default("both")),
  /** The admin API's interface: loopback unless set (put a proxy with TLS in front before opening it wider). */
  REELAY_ADMIN_HOST: z.preprocess(blankAsUnset, z.string().min(1).default("127.0.0.1")),
  /** The admin API's port (0: any free port); unset: PORT + 1 (any free port when PORT is 0); `off`: no admin API. */
  REELAY_ADMIN_PORT: optional(portOrOff),
  LOG_LEVEL: z.preprocess(blankAsUnset, z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info")),
});
export type ReelayEnvironment = z.infer<typeof ReelayEnvironment>;
