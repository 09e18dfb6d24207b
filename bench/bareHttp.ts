/**
 * The baseline for the query benchmark: a bare node:http handler answering fixed bytes (the JSON a task
 * query returns, read from the file in argv[2]) with the same content-type, and nothing else — the same
 * HTTP server reelay's edge runs on, so the ratio is reelay's own work per request.
 * Run as its own process so it can be pinned: `taskset -c 0 node --import tsx bench/bareHttp.ts body.json`.
 * Prints `PORT <n>` once listening on loopback.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:http";

const bodyFile = process.argv[2];
if (!bodyFile) {
  process.stderr.write("usage: bareHttp.ts <body-file>\n");
  process.exit(2);
}
const body = readFileSync(bodyFile);
const headers = { "content-type": "application/json", "content-length": String(body.length) };
const server = createServer({ keepAliveTimeout: 65_000, noDelay: true }, (_req, res) => {
  res.writeHead(200, headers);
  res.end(body);
});
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  process.stdout.write(`PORT ${typeof address === "object" && address ? address.port : 0}\n`);
});
process.on("SIGTERM", () => process.exit(0));
