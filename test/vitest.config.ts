import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";
import { shippedPackageBuilds } from "./shippedPackageBuilds.ts";

/**
 * Tests that kill processes (runners, edges, nats-server) with SIGKILL: part of `npm test`, and a project of
 * their own only in `npm run test:crash` (which runs them alone, e.g. five times in a row). A second project in
 * every run had workers and a transform of every module of its own (one sampled run each, 2026-11-28: 275-282 s
 * of CPU for the suite against 240 s; see docs/testing.md).
 */
const CRASH_TESTS = [
  "test/runnerRecovery.int.spec.ts",
  "test/billingCrashes.int.spec.ts",
  "test/workQueueServerCrash.int.spec.ts",
  "test/natsOutage.int.spec.ts",
  "test/serveLifecycle.e2e.spec.ts",
  "test/runnerReconnect.int.spec.ts",
  "test/webhookDispatcherCrash.int.spec.ts",
  "test/arkCrash.int.spec.ts",
  "test/wholeSystemCrash.int.spec.ts",
  "test/createUnderServerStall.int.spec.ts",
  "test/adversarialMoney.chatChargeServerLost.int.spec.ts",
  "test/adversarialMoney.chatChargeLate.int.spec.ts",
  "test/adversarialMoney.chatHoldServerStall.int.spec.ts",
];

/**
 * Tests on a 3-node cluster with services as child processes (about 30 s each): `npm run test:cluster`, which
 * `.ci/run` runs after `npm test`; they are not part of `npm test` (90 s on this machine).
 */
const CLUSTER_TESTS = ["test/clusterNodeLoss.int.spec.ts"];
const clusterRun = process.env.REELAY_TEST_CLUSTER === "1";
const crashRun = process.env.REELAY_TEST_CRASH === "1";

export default defineConfig({
  root: fileURLToPath(new URL("..", import.meta.url)),
  plugins: [shippedPackageBuilds()],
  test: {
    globalSetup: ["test/globalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // expect.poll waits for something that will happen (a request relayed, an event folded): vitest's default
    // of 1 s failed a loaded run that was merely slow (a process's first chat request builds the tokenizer's
    // table, about 0.4 s of CPU alone, several times that beside the type check and four other files). A poll
    // still ends as soon as it passes.
    expect: { poll: { timeout: 5_000 } },
    // Two cores, and many files spend much of their time waiting (child processes starting, leases running out,
    // a frozen nats-server): five files at once kept both cores busier than four (82 s against 88.6 s for the
    // whole suite, 2026-11-26); six made no further difference.
    maxWorkers: 5,
    pool: "forks",
    reporters: ["default", "./test/plainSummaryReporter.ts"],
    projects: [
      // Files share a worker's module cache (each still starts its own nats-server and services): loading
      // the modules again for every file cost more than a third of the run.
      // The fleet test (test/fleet/) runs on its own: `npm run test:fleet` (test/vitest.fleet.config.ts).
      // Each crash file gets its own nats-server, processes and store like any other file.
      ...(crashRun
        ? [{ extends: true as const, test: { name: "crash", include: CRASH_TESTS, isolate: false } }]
        : [{ extends: true as const, test: { name: "main", include: ["test/**/*.spec.ts"], exclude: [...CLUSTER_TESTS, "test/fleet/**"], isolate: false } }]),
      ...(clusterRun ? [{ extends: true as const, test: { name: "cluster", include: CLUSTER_TESTS, isolate: true } }] : []),
    ],
  },
});
