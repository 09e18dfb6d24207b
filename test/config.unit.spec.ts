import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { ConfigError, DEFAULT_CONFIG_PATH, loadConfig } from "../services/shared/config.ts";
import { environment } from "../services/shared/environment.ts";

interface RawConfig {
  providers: Record<string, Record<string, unknown>>;
  videoModels: Record<string, Record<string, unknown>>;
  limits: Record<string, unknown>;
}
const shipped = () => JSON.parse(readFileSync(DEFAULT_CONFIG_PATH, "utf8")) as RawConfig;
const model = (config: RawConfig, name: string): Record<string, unknown> => config.videoModels[name] ?? {};
function configFile(content: unknown): string {
  const path = join(mkdtempSync(join(tmpdir(), "reelay-config-")), "config.json");
  writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content));
  return path;
}

describe("model and provider config", () => {
  it("the shipped default is valid: three enabled models on the local provider with the spec's prices, Seedance ready but off", () => {
    const config = loadConfig(DEFAULT_CONFIG_PATH);
    const enabled = Object.entries(config.videoModels).filter(([, m]) => m.enabled);
    expect(enabled.map(([name]) => name)).toEqual(["VideoModel-2.0", "VideoModel-2.0-fast", "VideoModel-2.0-mini"]);
    expect(enabled.map(([, m]) => [m.provider, m.pricePerMillionTokens, m.capabilities])).toEqual([
      ["local", 46, ["image", "video", "audio"]],
      ["local", 37, ["image"]],
      ["local", 23, []],
    ]);
    // Switching Seedance on is a key variable and `enabled: true`: both vendors' hosts as the official SDK takes them.
    expect(config.videoModels["Seedance-2.0"]).toMatchObject({ enabled: false, provider: ["seedance-cn", "seedance-intl"] });
    expect(config.providers["seedance-cn"]).toMatchObject({ kind: "ark", baseUrl: "https://ark.cn-beijing.volces.com/api/v3", apiKeyEnv: "ARK_API_KEY" });
    expect(config.providers["seedance-intl"]).toMatchObject({ kind: "ark", baseUrl: "https://ark.ap-southeast.bytepluses.com/api/v3" });
  });

  it.each([
    ["an Ark model without the vendor's model id", (c: RawConfig) => delete model(c, "Seedance-2.0").upstreamModel, 'videoModels.Seedance-2.0.upstreamModel: needs the vendor\'s model id for provider "seedance-cn"'],
    ["an Ark key in the file instead of a variable name", (c: RawConfig) => ((c.providers["seedance-cn"] ?? {}).apiKeyEnv = "sk-abc123"), "providers.seedance-cn.apiKeyEnv: must be an environment variable name"],
    ["an image role Ark does not know", (c: RawConfig) => (model(c, "Seedance-2.0").imageRole = "last_frame"), "videoModels.Seedance-2.0.imageRole"],
    ["a channel list naming an unknown provider", (c: RawConfig) => (model(c, "Seedance-2.0").provider = ["seedance-cn", "nope"]), 'unknown provider "nope"'],
    ["an Ark base URL that is not http(s)", (c: RawConfig) => ((c.providers["seedance-cn"] ?? {}).baseUrl = "ftp://ark"), "providers.seedance-cn.baseUrl: must be an http(s) URL"],
  ])("Seedance config: %s is refused with the field named", (_name, breakIt, message) => {
    const config = shipped();
    breakIt(config);
    expect(() => loadConfig(configFile(config))).toThrow(message);
  });

  it("ships every vendor ready but off, at the base its official SDK uses, Kling with both key variables", () => {
    const config = loadConfig(DEFAULT_CONFIG_PATH);
    expect(config.providers["wan-cn"]).toMatchObject({ kind: "dashscope", baseUrl: "https://dashscope.aliyuncs.com/api/v1", apiKeyEnv: "DASHSCOPE_API_KEY" });
    expect(config.providers["kling-cn"]).toMatchObject({ kind: "kling", baseUrl: "https://api-beijing.klingai.com", apiKeyEnv: "KLING_ACCESS_KEY", secretKeyEnv: "KLING_SECRET_KEY" });
    expect(config.providers["hailuo-cn"]).toMatchObject({ kind: "minimax", baseUrl: "https://api.minimaxi.com", apiKeyEnv: "MINIMAX_API_KEY" });
    expect(config.providers.veo).toMatchObject({ kind: "veo", baseUrl: "https://generativelanguage.googleapis.com", apiKeyEnv: "GEMINI_API_KEY" });
    for (const name of ["Wan-2.6-t2v", "Wan-2.6-i2v", "Kling-2.5-turbo", "Hailuo-2.3", "Veo-3.1-fast"]) expect(config.videoModels[name]?.enabled).toBe(false);
  });

  it.each([
    ["a Kling entry without its secret key variable", (c: RawConfig) => delete (c.providers["kling-cn"] ?? {}).secretKeyEnv, "providers.kling-cn.secretKeyEnv"],
    ["a Wan model without the vendor's model id", (c: RawConfig) => delete model(c, "Wan-2.6-t2v").upstreamModel, 'needs the vendor\'s model id for provider "wan-cn"'],
    ["callbacks on a vendor that sends none", (c: RawConfig) => ((c.providers.veo ?? {}).publicCallbackUrl = "https://reelay.example"), "providers.veo"],
    ["a negative upstream price", (c: RawConfig) => (model(c, "Veo-3.1-fast").upstreamPrice = -1), "videoModels.Veo-3.1-fast.upstreamPrice"],
  ])("vendor config: %s is refused with the field named", (_name, breakIt, message) => {
    const config = shipped();
    breakIt(config);
    expect(() => loadConfig(configFile(config))).toThrow(message);
  });

  it.each([
    ["a model on an unknown provider", (c: RawConfig) => (model(c, "VideoModel-2.0").provider = "nope"), 'videoModels.VideoModel-2.0.provider: unknown provider "nope"'],
    ["a missing price", (c: RawConfig) => delete model(c, "VideoModel-2.0-mini").pricePerMillionTokens, "videoModels.VideoModel-2.0-mini.pricePerMillionTokens"],
    ["an unknown capability", (c: RawConfig) => (model(c, "VideoModel-2.0-fast").capabilities = ["smell"]), "videoModels.VideoModel-2.0-fast.capabilities.0"],
    ["a misspelt limit", (c: RawConfig) => (c.limits.maxPromptChar = 5), "limits"],
    ["a CORS origin with a path", (c: RawConfig) => Object.assign(c, { cors: { allowedOrigins: ["https://app.example/x"] } }), "cors.allowedOrigins.0"],
  ])("refuses %s, naming the field", (_name, breakIt, field) => {
    const config = shipped();
    breakIt(config);
    expect(() => loadConfig(configFile(config))).toThrow(ConfigError);
    expect(() => loadConfig(configFile(config))).toThrow(field);
  });

  it("refuses a file with only the part the operator changed: each missing section is named, and the shipped file to start from", () => {
    const path = configFile({ providers: shipped().providers });
    expect(() => loadConfig(path)).toThrow(`videoModels: is missing`);
    expect(() => loadConfig(path)).toThrow(`a config file replaces the shipped one whole: start from a copy of ${DEFAULT_CONFIG_PATH}`);
    const priceless = shipped();
    delete model(priceless, "VideoModel-2.0-mini").pricePerMillionTokens;
    const message = (() => {
      try {
        loadConfig(configFile(priceless));
        return "";
      } catch (error) {
        return (error as Error).message;
      }
    })();
    expect(message).toContain("videoModels.VideoModel-2.0-mini.pricePerMillionTokens: is missing");
    expect(message).not.toContain("replaces the shipped one");
  });

  it("refuses a file that is not JSON, naming the file", () => {
    const path = configFile("{ not json");
    expect(() => loadConfig(path)).toThrow(`cannot read config ${path}`);
  });

  it("refuses a create write budget longer than the stream remembers a try's msgID, naming the setting", () => {
    const config = shipped();
    config.limits.createWriteMs = 300_000;
    expect(() => loadConfig(configFile(config))).toThrow(/limits\.createWriteMs/);
    config.limits.createWriteMs = 60_000;
    expect(loadConfig(configFile(config)).limits.createWriteMs).toBe(60_000);
  });

  it("a bad config stops `reelay serve` with the problem and exit code 1, before touching NATS", async () => {
    const config = shipped();
    model(config, "VideoModel-2.0").pricePerMillionTokens = -1;
    const cli = new URL("../scripts/reelay.mjs", import.meta.url).pathname;
    const failure = await promisify(execFile)(process.execPath, [cli, "serve"], {
      env: { ...process.env, REELAY_CONFIG: configFile(config), NATS_URL: "nats://127.0.0.1:1" },
    }).catch((error: { code: number; stderr: string }) => error);
    expect(failure).toMatchObject({ code: 1 });
    expect((failure as { stderr: string }).stderr).toMatch(/videoModels\.VideoModel-2\.0\.pricePerMillionTokens/);
    expect((failure as { stderr: string }).stderr).not.toMatch(/\n\s+at /);
  });

  const badVariables = [
    ["PORT", "eighty", /PORT="eighty": must be a port number from 0 to 65535$/m],
    ["PORT", "70000", /PORT="70000": must be a port number from 0 to 65535$/m],
    ["PORT", "80.5", /PORT="80.5": must be a port number/],
    ["REELAY_ADMIN_PORT", "none", /REELAY_ADMIN_PORT="none": must be a port number from 0 to 65535, or "off"/],
    ["REELAY_PUBLIC_URL", "javascript:alert(1)", /REELAY_PUBLIC_URL=.*http\(s\) URL/],
    ["REELAY_REPLICAS", "two", /REELAY_REPLICAS="two": must be a number of copies from 1 to 5/],
    ["REELAY_REPLICAS", "7", /REELAY_REPLICAS="7": must be a number of copies from 1 to 5/],
    ["NATS_URL", "localhost 4222", /NATS_URL=.*nats:\/\/host:port/],
    ["LOG_LEVEL", "loud", /LOG_LEVEL="loud"/],
    ["REELAY_METRICS_PORT", "-1", /REELAY_METRICS_PORT="-1": must be a port number/],
    ["REELAY_TRUSTED_PROXIES", "10.0.0.0/33", /REELAY_TRUSTED_PROXIES.*"10\.0\.0\.0\/33" is not an IP address or a CIDR range/],
    ["REELAY_TRUSTED_PROXIES", "127.0.0.1, proxy.example", /REELAY_TRUSTED_PROXIES.*"proxy\.example" is not an IP address/],
  ] as const;

  it.each(badVariables)("a bad %s (%s) is refused naming the variable", (name, value, message) => {
    expect(() => environment({ ...process.env, [name]: value })).toThrow(ConfigError);
    expect(() => environment({ ...process.env, [name]: value })).toThrow(message);
  });

  it("ports are read as numbers, the admin port also as off; blank means unset", () => {
    const read = environment({ PORT: " 0 ", REELAY_METRICS_PORT: "9464", REELAY_ADMIN_PORT: "off" });
    expect([read.PORT, read.REELAY_METRICS_PORT, read.REELAY_ADMIN_PORT]).toEqual([0, 9464, "off"]);
    const defaults = environment({ PORT: "", REELAY_ADMIN_PORT: "65535" });
    expect([defaults.PORT, defaults.REELAY_METRICS_PORT, defaults.REELAY_ADMIN_PORT]).toEqual([8080, undefined, 65_535]);
  });

  it("a bad variable stops `reelay serve` with the message and exit code 1, before touching anything", async () => {
    const cli = new URL("../scripts/reelay.mjs", import.meta.url).pathname;
    const failure = await promisify(execFile)(process.execPath, [cli, "serve"], { env: { ...process.env, NATS_URL: "nats://127.0.0.1:1", PORT: "eighty" } }).catch(
      (error: { code: number; stderr: string }) => error,
    );
    expect(failure).toMatchObject({ code: 1 });
    expect((failure as { stderr: string }).stderr).toMatch(/invalid environment/);
    expect((failure as { stderr: string }).stderr).toMatch(/PORT="eighty"/);
    expect((failure as { stderr: string }).stderr).not.toMatch(/\n\s+at /);
  });
});
