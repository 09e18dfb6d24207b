import { createServer, type RequestListener, type Server } from "node:http";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isPublicAddress, publicOnly } from "../services/shared/publicAddressGuard.ts";
import { fetchReference } from "../services/runner/providers/local/referenceFetch.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";
import { VideoClient } from "./helpers/videoClient.ts";

const PNG = Buffer.from("89504e470d0a1a0a0000000d49484452000000010000000108020000009077053de0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082", "hex");

async function listen(handler: RequestListener): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  return { server, url: `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}` };
}

describe("reference URLs the local renderer fetches", () => {
  let image: { server: Server; url: string };
  let app: TestApp;

  beforeAll(async () => {
    image = await listen((_req, res) => res.writeHead(200, { "content-type": "image/png" }).end(PNG));
    // The shipped default: private addresses refused.
    app = await startTestApp({ tweak: (config) => Object.values(config.providers).forEach((p) => "allowPrivateReferenceUrls" in p && (p.allowPrivateReferenceUrls = false)) });
  });
  afterAll(async () => {
    image?.server.close();
    await app?.stop();
  });

  it.each(["127.0.0.1", "10.1.2.3", "172.20.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "::1", "fd00::1", "::ffff:127.0.0.1"])("refuses %s", (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(["8.8.8.8", "2001:4860:4860::8888"])("lets the public address %s through", (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });

  it("refuses a name that resolves to loopback (localhost)", async () => {
    await expect(fetchReference(`http://localhost:${new URL(image.url).port}/red.png`, mkdtempSync(join(tmpdir(), "reelay-ref-")), 1_000_000, undefined, publicOnly())).rejects.toThrow(
      /localhost resolves to .*private or local address/,
    );
  });

  it("with the shipped default, a task whose image_url points inside our network fails and says why", async () => {
    const client = new VideoClient(app.baseUrl, await app.keyFor("prober"));
    const created = await client.create({ model: "VideoModel-2.0", prompt: "probe", duration: 4, image_url: `${image.url}/red.png` });
    const final = await client.waitForFinal(created.body.data?.task_id as number);
    expect(final.body).toEqual({ code: 500, msg: expect.stringMatching(/could not fetch image_url: .*private or local address/) });
  });
});
