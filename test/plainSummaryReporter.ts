import type { Reporter, TestModule } from "vitest/node";

/**
 * Ends the run with the plain line `N passed, N failed` (plus skipped) that CI reads in any language,
 * and counts a file that failed to load, or whose set-up failed, as a failure.
 */
export default class PlainSummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const module of testModules) {
      let failedHere = 0;
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed += 1;
        else if (state === "failed") failedHere += 1;
        else skipped += 1;
      }
      // A file that failed with no failed test: it failed to load, or a hook failed (its tests then show as skipped).
      failed += module.state() === "failed" && failedHere === 0 ? 1 : failedHere;
    }
    process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ""}\n`);
  }
}
