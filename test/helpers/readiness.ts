import { expect } from "vitest";

/**
 * The edge at `baseUrl` answers /healthz 200 again within 10 s. After a test has kept its event loop busy (a
 * flood of bad input), its feed of the task log can count as silent for a moment and /healthz rightly says
 * 503 until the next heartbeat is taken: "still working" means ready again soon, not at the very first ask.
 */
export async function expectReadyAgain(baseUrl: string): Promise<void> {
  await expect.poll(async () => (await fetch(`${baseUrl}/healthz`)).status, { timeout: 10_000, interval: 100 }).toBe(200);
}
