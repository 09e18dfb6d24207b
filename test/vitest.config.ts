import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  root: fileURLToPath(new URL("..", import.meta.url)),
  test: {
    include: ["test/**/*.spec.ts"],
    globalSetup: ["test/globalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: files that start servers and render videos run two at a time.
    maxWorkers: 2,
    pool: "forks",
    reporters: ["default", "./test/plainSummaryReporter.ts"],
  },
});
