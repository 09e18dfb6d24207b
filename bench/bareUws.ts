/**
 * The baseline for the query benchmark: a bare uWebSockets.js handler answering fixed bytes (the JSON a
 * task query returns, read from the file in argv[2]) with the same content-type, and nothing else.
 * Run as its own process so it can be pinned: `taskset -c 0 node --import tsx bench/bareUws.ts body.json`.
 * Prints `PORT <n>` once listening on loopback.
 */
import { readFileSync } from "node:fs";
import uWS from "uWebSockets.js";

const bodyFile = process.argv[2];
if (!bodyFile) {
  process.stderr.write("usage: bareUws.ts <body-file>\n");
  process.exit(2);
}
const body = readFileSync(bodyFile);
const app = uWS.App();
if (app.constructor.name !== "uWS.App") {
  process.stderr.write(`uWebSockets.js native build did not load (got ${app.constructor.name}); the baseline would be meaningless\n`);
  process.exit(1);
}
app.get("/*", (res) => {
  res.writeStatus("200 OK");
  res.writeHeader("content-type", "application/json");
  res.end(body);
});
app.listen("127.0.0.1", 0, (socket) => {
  if (!socket) {
    process.stderr.write("bare uWS could not listen\n");
    process.exit(1);
  }
  process.stdout.write(`PORT ${uWS.us_socket_local_port(socket)}\n`);
});
process.on("SIGTERM", () => process.exit(0));
