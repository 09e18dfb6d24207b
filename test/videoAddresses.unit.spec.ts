import { describe, expect, it } from "vitest";
import type { TaskView } from "../contracts/videoTask.ts";
import type { RequestInfo } from "../services/edge/http/request.ts";
import { trustedProxies, videoBaseUrl } from "../services/edge/http/videoBaseUrl.ts";
import { QueryReplyCache } from "../services/edge/video/taskReplies.ts";

const request = (headers: Record<string, string>, peer = "203.0.113.9"): RequestInfo => ({
  method: "GET",
  url: "/api/compat/videosTask",
  query: "id=1",
  header: (name) => headers[name] ?? "",
  peer,
});
const own = () => "localhost:8080";

describe("where video addresses point", () => {
  it("REELAY_PUBLIC_URL wins over every header", () => {
    const base = videoBaseUrl({ publicUrl: "https://video.example.com/", trusted: trustedProxies(["0.0.0.0/0"]), fallbackHost: own });
    expect(base(request({ host: "attacker.example", "x-forwarded-host": "attacker.example", "x-forwarded-proto": "http" }, "10.0.0.1"))).toBe("https://video.example.com");
  });

  it.each([
    ["a plain host", "videos.example", "http://videos.example"],
    ["a host with a port", "videos.example:8443", "http://videos.example:8443"],
    ["an IPv6 literal", "[::1]:8080", "http://[::1]:8080"],
    ["a path", "evil.example/<script>", "http://localhost:8080"],
    ["credentials", "user@evil.example", "http://localhost:8080"],
    ["a label longer than DNS allows", `${"a".repeat(64)}.example`, "http://localhost:8080"],
    ["a name longer than 255 characters", `${"a.".repeat(130)}example`, "http://localhost:8080"],
    ["nothing (HTTP/1.0)", "", "http://localhost:8080"],
  ])("uses the Host header when it is %s (else the edge's own address)", (_name, host, expected) => {
    const base = videoBaseUrl({ publicUrl: undefined, trusted: undefined, fallbackHost: own });
    expect(base(request({ host }))).toBe(expected);
  });

  it("believes X-Forwarded-Proto/-Host only from trusted proxies, and only valid ones", () => {
    const base = videoBaseUrl({ publicUrl: undefined, trusted: trustedProxies(["10.0.0.0/8", "::1"]), fallbackHost: own });
    const forwarded = { host: "reelay.internal:8080", "x-forwarded-proto": "https", "x-forwarded-host": "video.example.com" };
    expect(base(request(forwarded, "10.1.2.3"))).toBe("https://video.example.com");
    // node:http reports IPv4 peers of a dual-stack listener as IPv4-mapped IPv6.
    expect(base(request(forwarded, "::ffff:10.1.2.3"))).toBe("https://video.example.com");
    expect(base(request(forwarded, "::1"))).toBe("https://video.example.com");
    expect(base(request(forwarded, "203.0.113.9"))).toBe("http://reelay.internal:8080");
    // In a list the last entry is the one our proxy added (the first may be the client's own); anything but
    // http/https, or not a host, is ignored.
    expect(base(request({ ...forwarded, "x-forwarded-proto": "http, https", "x-forwarded-host": "attacker.example, video.example.com" }, "10.1.2.3"))).toBe("https://video.example.com");
    expect(base(request({ ...forwarded, "x-forwarded-proto": "javascript", "x-forwarded-host": "x/<y>" }, "10.1.2.3"))).toBe("http://reelay.internal:8080");
  });
});

describe("the task-query reply cache", () => {
  const view = { taskId: 7, version: 3, account: "a", status: "success", providerTaskId: "local-7-x", video: { object: "local-7-x.mp4" }, durationSeconds: 5, resolution: "1280*720", totalTokens: 1, costMicros: 1 } as unknown as TaskView;

  it("holds a fixed number of replies whatever hosts clients name", () => {
    const cache = new QueryReplyCache(500);
    for (let i = 0; i < 5_000; i++) cache.reply(view, `http://h${i}.${"x".repeat(60)}.example`);
    expect(cache.size).toBe(500);
    expect(JSON.parse(String(cache.reply(view, "http://h4999.".concat("x".repeat(60), ".example")).body)).data.video_url).toBe(
      `http://h4999.${"x".repeat(60)}.example/videos/local-7-x.mp4`,
    );
  });
});
