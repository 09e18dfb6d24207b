import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";

/** A user and password the embedded nats-server requires of every client. */
export const NatsCredentials = z.object({ user: z.string().regex(/^[A-Za-z0-9_-]+$/), password: z.string().regex(/^[A-Za-z0-9_-]{32,}$/) });
export type NatsCredentials = z.infer<typeof NatsCredentials>;

export const credentialsPath = (dataDir: string): string => join(dataDir, "nats-credentials.json");

/**
 * The embedded server's credentials, made at the data dir's first start: without them any local process
 * could connect and, say, credit an account. Owner-only (0600), like the store beside it; services and the
 * CLI read them from here.
 */
export function embeddedCredentials(dataDir: string): NatsCredentials {
  const path = credentialsPath(dataDir);
  if (existsSync(path)) {
    // Tightened on every start too: a copy or a restore may have widened it.
    chmodSync(path, 0o600);
    return NatsCredentials.parse(JSON.parse(readFileSync(path, "utf8")));
  }
  mkdirSync(dataDir, { recursive: true });
  const credentials: NatsCredentials = { user: "reelay", password: randomBytes(32).toString("base64url") };
  // "wx": two commands starting at once never overwrite each other's file.
  try {
    writeFileSync(path, JSON.stringify(credentials), { mode: 0o600, flag: "wx" });
  } catch {
    return embeddedCredentials(dataDir);
  }
  return credentials;
}

/** The server config's authorization block for them (values are base64url: nothing to escape). */
export const authorizationBlock = (credentials: NatsCredentials): string => `\nauthorization {\n  user: "${credentials.user}"\n  password: "${credentials.password}"\n}\n`;
