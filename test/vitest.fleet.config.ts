import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

/**
 * `npm run test:fleet`: the fleet test (issue 35), one nats-server with several edges, runners and a projector
 * as processes. Not part of `npm test` (it takes tens of seconds on its own); `.ci/run` runs it after.
 */
export default defineConfig({
  root: fileURLToPath(new URL("..", import.meta.url)),
  test: {
    globalSetup: ["test/globalSetup.ts"],
    include: ["test/fleet/**/*.fleet.spec.ts"],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    pool: "forks",
    reporters: ["default", "./test/plainSummaryReporter.ts"],
  },
});
