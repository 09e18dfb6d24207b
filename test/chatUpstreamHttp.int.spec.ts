import { createServer, type Server, type Socket } from "node:net";
import type { AddressInfo } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChunkedDecoder, ProtocolError } from "../services/edge/chat/providers/openaiCompatible/chunkedDecoder.ts";
import { post, targetOf, type ResponseHandlers } from "../services/edge/chat/providers/openaiCompatible/http1Client.ts";

const chunked = (parts: string[]) => parts.map((p) => `${Buffer.byteLength(p).toString(16)}\r\n${p}\r\n`).join("") + "0\r\n\r\n";

describe("chunked decoder", () => {
  it("decodes any body however the input is cut, and reports where the body ended", () => {
    fc.assert(
      fc.property(fc.array(fc.string({ minLength: 1 }), { maxLength: 8 }), fc.array(fc.nat(40), { maxLength: 10 }), (parts, cuts) => {
        const wire = Buffer.concat([Buffer.from(chunked(parts)), Buffer.from("NEXT")]);
        const decoder = new ChunkedDecoder();
        const out: Buffer[] = [];
        let at = 0;
        let endedAt = -1;
        for (const cut of [...cuts, wire.length]) {
          const piece = wire.subarray(at, Math.min(wire.length, at + cut + 1));
          if (piece.length === 0 || endedAt >= 0) break;
          const end = decoder.push(piece, (p) => out.push(Buffer.from(p)));
          if (end >= 0) endedAt = at + end;
          at += piece.length;
        }
        expect(Buffer.concat(out).toString()).toBe(parts.join(""));
        expect(endedAt).toBe(wire.length - 4);
      }),
    );
  });

  it("accepts chunk extensions and trailers, refuses a bad size", () => {
    const out: string[] = [];
    const wire = Buffer.from("5;ext=1\r\nhello\r\n0\r\nx-trailer: y\r\n\r\n");
    expect(new ChunkedDecoder().push(wire, (p) => out.push(p.toString()))).toBe(wire.length);
    expect(out.join("")).toBe("hello");
    expect(() => new ChunkedDecoder().push(Buffer.from("zz\r\n"), () => {})).toThrow(ProtocolError);
  });
});

/** A raw TCP server whose answers the test scripts byte for byte. */
describe("upstream HTTP/1.1 client", () => {
  let server: Server;
  let port: number;
  let answer: (socket: Socket, request: string, index: number) => void = () => {};
  const connections: Socket[] = [];
  let requests = 0;

  beforeAll(async () => {
    server = createServer((socket) => {
      connections.push(socket);
      let buffered = "";
      socket.on("data", (data) => {
        buffered += data.toString();
        const end = buffered.indexOf("\r\n\r\n");
        const length = Number(/content-length: (\d+)/i.exec(buffered)?.[1] ?? 0);
        if (end >= 0 && buffered.length >= end + 4 + length) {
          const request = buffered;
          buffered = "";
          answer(socket, request, requests++);
        }
      });
      socket.on("error", () => {});
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => {
    for (const socket of connections) socket.destroy();
    server.close();
  });

  const call = (body = "{}") =>
    new Promise<{ status: number; headers: ReadonlyMap<string, string>; body: string; error?: Error }>((resolve) => {
      let status = 0;
      let headers: ReadonlyMap<string, string> = new Map();
      const chunks: Buffer[] = [];
      const handlers: ResponseHandlers = {
        onHead: (s, h) => ((status = s), (headers = h)),
        onData: (p) => chunks.push(Buffer.from(p)),
        onEnd: () => resolve({ status, headers, body: Buffer.concat(chunks).toString() }),
        onError: (error) => resolve({ status, headers, body: Buffer.concat(chunks).toString(), error }),
      };
      post(targetOf(new URL(`http://127.0.0.1:${port}/v1/chat/completions`)), "x-test: 1\r\n", Buffer.from(body), handlers);
    });

  it("sends one well-formed request and reads a chunked answer, reusing the connection", async () => {
    const seen: string[] = [];
    answer = (socket, request) => {
      seen.push(request);
      socket.write(`HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${chunked(["data: a\n\n", "data: b\n\n"])}`);
    };
    const before = connections.length;
    const first = await call('{"x":1}');
    const second = await call();
    expect(first).toMatchObject({ status: 200, body: "data: a\n\ndata: b\n\n" });
    expect(first.headers.get("content-type")).toBe("text/event-stream");
    expect(second.body).toBe(first.body);
    expect(connections.length - before).toBe(1);
    expect(seen[0]).toBe(`POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nx-test: 1\r\ncontent-length: 7\r\n\r\n{"x":1}`);
  });

  it("reads content-length and close-delimited bodies", async () => {
    answer = (socket) => socket.write('HTTP/1.1 400 Bad Request\r\ncontent-length: 11\r\n\r\n{"error":1}');
    expect(await call()).toMatchObject({ status: 400, body: '{"error":1}' });
    answer = (socket) => socket.end("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil close");
    expect(await call()).toMatchObject({ status: 200, body: "until close" });
  });

  it("sends again, once, when a pooled connection turns out to be closed", async () => {
    answer = (socket) => socket.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    await call();
    const served = requests;
    // The server drops the idle connection, and the next request takes it from the pool before the client
    // has noticed (the close is only read on the next turn of the event loop).
    for (const socket of connections) socket.destroy();
    expect(await call()).toMatchObject({ status: 200, body: "ok" });
    expect(requests).toBe(served + 1);
  });

  it("reports a broken-off answer and a malformed one as errors", async () => {
    answer = (socket) => socket.end(`HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel`);
    expect((await call()).error?.message).toMatch(/broke off/);
    answer = (socket) => socket.write("SMTP ready\r\n\r\n");
    expect((await call()).error?.message).toMatch(/malformed HTTP/);
    const refused = await new Promise<Error>((resolve) =>
      post(targetOf(new URL("http://127.0.0.1:1/v1")), "", Buffer.alloc(0), { onHead() {}, onData() {}, onEnd() {}, onError: resolve }),
    );
    expect(refused.message).toMatch(/cannot reach the upstream: ECONNREFUSED/);
  });
});
