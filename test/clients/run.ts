/**
 * `npm run test:clients`: the official OpenAI libraries for Node, Python, Go and Java against a running
 * reelay (echo model + a fake OpenAI-compatible upstream; Python also drives the Videos API). Each language's program prints one
 * PASS/FAIL line per check; this runner installs what each needs, runs it and sums up.
 *
 * REELAY_CLIENTS=node,python picks languages (default: all four).
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startFakeUpstream } from "../fakes/openaiUpstream.ts";
import { startTestApp } from "../helpers/testApp.ts";
import { arkSampleVideo } from "../fakes/arkUpstream.ts";
import { ScriptedVendor } from "../fakes/scriptedVendor.ts";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..");

interface Step {
  command: string;
  args: string[];
  cwd: string;
  /** Runs after the step succeeded. */
  then?: () => void;
}

/** Runs a command, echoing its output with a language prefix; resolves with exit code and output. */
function run(step: Step, label: string, env: NodeJS.ProcessEnv, timeoutMs = 15 * 60_000): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(step.command, step.args, { cwd: step.cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    const echo = (chunk: Buffer) => {
      output += chunk.toString();
      // Maven colours its output even with -q; the escapes alone would print as empty lines.
      const lines = chunk.toString().replace(/\x1b\[[0-9;]*m/g, "").split("\n");
      for (const line of lines.filter((l) => l.trim() !== "")) process.stdout.write(`  [${label}] ${line}\n`);
    };
    child.stdout.on("data", echo);
    child.stderr.on("data", echo);
    child.once("error", (error) => {
      clearTimeout(timer);
      resolve({ code: 127, output: `${output}\ncannot run ${step.command}: ${error.message}` });
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, output });
    });
  });
}

const python = join(here, "python");
const venvPython = join(python, ".venv", "bin", "python");

/** Setup steps run before the check; the last step is the check program itself. */
const LANGUAGES: Record<string, () => Step[]> = {
  node: () => [{ command: process.execPath, args: ["--import", "tsx", join(here, "node", "checkChat.ts")], cwd: root }],
  python: () => {
    const steps: Step[] = [];
    if (!existsSync(venvPython)) steps.push({ command: "python3", args: ["-m", "venv", ".venv"], cwd: python });
    // Reinstall only when requirements.txt changed since the last install into this venv.
    const stamp = join(python, ".venv", "requirements.installed");
    const wanted = readFileSync(join(python, "requirements.txt"), "utf8");
    if (!existsSync(stamp) || readFileSync(stamp, "utf8") !== wanted) {
      steps.push({
        command: venvPython,
        args: ["-m", "pip", "install", "-q", "--disable-pip-version-check", "-r", "requirements.txt"],
        cwd: python,
        then: () => writeFileSync(stamp, wanted),
      });
    }
    steps.push({ command: venvPython, args: ["check_chat.py"], cwd: python });
    steps.push({ command: venvPython, args: ["check_videos.py"], cwd: python });
    return steps;
  },
  go: () => [{ command: "go", args: ["run", "."], cwd: join(here, "go") }],
  java: () => [{ command: "mvn", args: ["-q", "-B", "compile", "exec:java"], cwd: join(here, "java") }],
};

async function main(): Promise<number> {
  const chosen = (process.env.REELAY_CLIENTS ?? Object.keys(LANGUAGES).join(",")).split(",").map((name) => name.trim());
  const unknown = chosen.filter((name) => !(name in LANGUAGES));
  if (unknown.length > 0) throw new Error(`unknown client language(s): ${unknown.join(", ")}`);

  const fake = await startFakeUpstream();
  process.env.REELAY_CLIENTS_UPSTREAM_KEY = fake.apiKey;
  // Videos run on the instant scripted vendor, which delivers a real 1280×720 H.264 MP4.
  const vendor = new ScriptedVendor({}, arkSampleVideo());
  const limited = await startTestApp({
    services: ["edge"],
    tweak: (config) => {
      config.limits.requestsPerSecondPerKey = 0.001;
      config.limits.burstPerKey = 1;
    },
  });
  const app = await startTestApp({
    providers: () => vendor,
    tweak: (config) => {
      config.chatModels["fake-gpt"] = {
        provider: "openai-compatible",
        baseUrl: fake.baseUrl,
        apiKeyEnv: "REELAY_CLIENTS_UPSTREAM_KEY",
        upstreamModel: "fake-upstream-model",
        inputPricePerMillionTokens: 1,
        outputPricePerMillionTokens: 2,
        timeoutMs: 30_000,
        maxCompletionTokens: 4096,
      };
    },
  });
  const env = {
    ...process.env,
    REELAY_BASE_URL: `${app.baseUrl}/api/compat`,
    REELAY_API_KEY: await app.keyFor("clients"),
    REELAY_CHAT_MODELS: "echo=|fake-gpt=You said: ",
    REELAY_POOR_API_KEY: await app.keyFor("clients-poor", 0),
    REELAY_LIMITED_BASE_URL: `${limited.baseUrl}/api/compat`,
    REELAY_LIMITED_API_KEY: await limited.keyFor("clients-limited", 10),
  };
  let passed = 0;
  let failed = 0;
  try {
    for (const language of chosen) {
      process.stdout.write(`${language}:\n`);
      const steps = LANGUAGES[language]?.() ?? [];
      let result = { code: 0, output: "" };
      let output = "";
      for (const step of steps) {
        result = await run(step, language, env);
        output += result.output;
        if (result.code !== 0) break;
        step.then?.();
      }
      // Every check program of the language counts (Python has one for chat, one for videos).
      const passes = output.match(/^PASS /gm)?.length ?? 0;
      const fails = output.match(/^FAIL /gm)?.length ?? 0;
      passed += passes;
      failed += fails;
      // A setup step or a crash that reported no check still fails the language.
      if (result.code !== 0 && fails === 0) {
        failed++;
        process.stdout.write(`  [${language}] FAIL ${language}: exited with code ${result.code} before reporting a failed check\n`);
      }
    }
  } finally {
    await app.stop();
    await limited.stop();
    await fake.stop();
  }
  process.stdout.write(`${passed} passed, ${failed} failed\n`);
  return failed === 0 ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`test:clients: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
