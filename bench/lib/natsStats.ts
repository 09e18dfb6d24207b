import { z } from "zod";

const Varz = z.object({ in_msgs: z.number(), out_msgs: z.number(), in_bytes: z.number(), out_bytes: z.number() });
export type Varz = z.infer<typeof Varz>;

/** The monitor endpoint infra/natsServer.ts opens next to a server started on loopback: port + 1. */
export function monitorUrl(natsUrl: string): string {
  const port = Number(new URL(natsUrl.replace(/^nats:/, "http:")).port);
  return `http://127.0.0.1:${port + 1}`;
}

/** Server-wide message counters (client → server `in`, server → client `out`). */
export async function varz(natsUrl: string): Promise<Varz> {
  const response = await fetch(`${monitorUrl(natsUrl)}/varz`);
  return Varz.parse(await response.json());
}

export const varzDelta = (before: Varz, after: Varz): Varz => ({
  in_msgs: after.in_msgs - before.in_msgs,
  out_msgs: after.out_msgs - before.out_msgs,
  in_bytes: after.in_bytes - before.in_bytes,
  out_bytes: after.out_bytes - before.out_bytes,
});
