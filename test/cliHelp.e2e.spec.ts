import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reelayInProcess } from "./helpers/cliInProcess.ts";
import { startTestApp, type TestApp } from "./helpers/testApp.ts";

const CLI = new URL("../scripts/reelay.mjs", import.meta.url).pathname;

/** A command given an action it does not have answers its own usage line: what it really takes. */
const COMMANDS_AND_THEIR_USAGE = [
  ["accounts", "frob"],
  ["admin", "frob"],
  ["audit", "frob"],
  ["channels", "frob"],
  ["infra", "frob"],
  ["keys", "frob"],
  ["tasks", "frob"],
  ["webhooks", "frob", "--account", "help-check"],
];

describe("reelay --help", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => app?.stop());

  it("lists every action each command takes (its usage line, as the command itself prints it)", async () => {
    const { stdout: help } = await promisify(execFile)(process.execPath, [CLI, "--help"]);
    for (const args of COMMANDS_AND_THEIR_USAGE) {
      const { code, stderr } = await reelayInProcess(app, ...args);
      expect(code).toBe(1);
      const usage = /usage: reelay (.*)$/m.exec(stderr)?.[1];
      expect(usage, stderr).toBeDefined();
      // Each alternative by its command and action (`audit charges`), the options aside.
      for (const alternative of (usage ?? "").split(" | ")) {
        const named = alternative.split(" ").filter((word) => /^[a-z]+$/.test(word)).slice(0, 2).join(" ");
        expect(help, `reelay --help does not list "${named}" (from: ${alternative})`).toContain(`reelay ${named}`);
      }
    }
  });
});
