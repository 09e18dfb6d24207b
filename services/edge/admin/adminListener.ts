import type { Logger } from "../../shared/log.ts";
import { AdminTokenStore } from "../../shared/adminTokens.ts";
import { HttpApp } from "../http/httpApp.ts";
import { writeReply } from "../http/reply.ts";
import { ADMIN_BASE, registerAdminEndpoints } from "./adminApi.ts";
import type { AdminDeps } from "./adminDeps.ts";
import { adminEndpoints } from "./adminEndpoints.ts";
import { adminErrorReply } from "./adminErrors.ts";
import { registerAdminEvents } from "./adminEvents.ts";
import { bundleConsole } from "./consoleAssets.ts";
import { openApiDocument } from "./openApi.ts";

/**
 * The admin API and the console (`/console/`) on a listener of its own, on loopback unless REELAY_ADMIN_HOST says otherwise: operators'
 * routes never share a port with customers', so exposing the public API never exposes these.
 */
export async function startAdminListener(deps: AdminDeps & { host: string; port: number; keepaliveMs: number; log: Logger }): Promise<{ port: number; close(): Promise<void> }> {
  const errorReply = adminErrorReply(deps.log);
  const app = new HttpApp({ allowedOrigins: [] }, (_path, error) => errorReply(error), false);
  const endpoints = adminEndpoints(deps);
  const tokens = new AdminTokenStore(deps.nats.adminTokens);
  registerAdminEndpoints(app, endpoints, { tokens, log: deps.log });
  registerAdminEvents(app, { nats: deps.nats, tokens, log: deps.log, keepaliveMs: deps.keepaliveMs });
  const document = JSON.stringify(openApiDocument(endpoints));
  // The description of the API is public on this (loopback) listener: clients generate from it before they hold a token.
  app.get(`${ADMIN_BASE}/openapi.json`, (_req, res) => writeReply(res, { status: 200, headers: { "content-type": "application/json" }, body: document }));
  // The console: bundled at start, served from memory; the token stays in the browser tab (no cookies).
  const assets = await bundleConsole();
  // No page may frame the console (clickjacking a signed-in operator into a credit): CSP for current
  // browsers, X-Frame-Options for older ones.
  const security = {
    "content-security-policy": "default-src 'self'; media-src *; img-src 'self' data:; frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "cache-control": "no-cache",
  };
  app.get("/console/", (_req, res) => writeReply(res, { status: 200, headers: { ...security, "content-type": "text/html; charset=utf-8" }, body: assets.html }));
  app.get("/console/app.js", (_req, res) => writeReply(res, { status: 200, headers: { ...security, "content-type": "text/javascript; charset=utf-8" }, body: assets.js }));
  app.get("/console/console.css", (_req, res) => writeReply(res, { status: 200, headers: { ...security, "content-type": "text/css; charset=utf-8" }, body: assets.css }));
  const toConsole = { status: 302, headers: { location: "/console/" }, body: "" };
  app.get("/", (_req, res) => writeReply(res, toConsole));
  app.get("/console", (_req, res) => writeReply(res, toConsole));
  // Its port is REELAY_ADMIN_PORT's, or PORT + 1 by default: the message names the setting that moves it.
  const port = await app.listen(deps.host, deps.port, { host: "REELAY_ADMIN_HOST", port: 'REELAY_ADMIN_PORT (or "off")' });
  return { port, close: () => app.close() };
}
