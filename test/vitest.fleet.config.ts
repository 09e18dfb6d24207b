import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { shippedPackageBuilds } from "./shippedPackageBuilds.ts";

/**
 * `npm run test:fleet`: the tests of several runners and edges on one nats-server — the fleet test (issue 35:
 * edges, runners and a projector as processes) and two runners through a restart of the server (issue 34:
 * nothing rendered twice). Not part of `npm test` (each takes tens of seconds of the two cores, most of it
 * ffmpeg and child processes); `.ci/run` runs them after it.
 */
export default defineConfig({
  root: fileURLToPath(new URL("..", import.meta.url)),
  plugins: [shippedPackageBuilds()],
  test: {
    globalSetup: ["test/globalSetup.ts"],
    include: ["test/fleet/**/*.fleet.spec.ts"],
    testTimeout: 180_000,
    hookTimeout: 120_000,
    pool: "forks",
    reporters: ["default", "./test/plainSummaryReporter.ts"],
  },
});
