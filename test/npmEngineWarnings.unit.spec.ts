import { describe, expect, it } from "vitest";
import { summarizeEngineWarnings } from "../scripts/npmEngineWarnings.mjs";

/** What npm 11 printed on Node 20 for two of reelay's packages (npm ci, 2026-11-28). */
const NPM_CI_ON_NODE_20 = [
  "npm warn EBADENGINE Unsupported engine {",
  "npm warn EBADENGINE   package: '@nats-io/nuid@3.0.0',",
  "npm warn EBADENGINE   required: { node: '>= 22.x' },",
  "npm warn EBADENGINE   current: { node: 'v20.20.2', npm: '11.19.1' }",
  "npm warn EBADENGINE }",
  "npm warn EBADENGINE Unsupported engine {",
  "npm warn EBADENGINE   package: '@opentelemetry/core@3.1.0',",
  "npm warn EBADENGINE   required: { node: '>=22.15.0' },",
  "npm warn EBADENGINE   current: { node: 'v20.20.2', npm: '11.19.1' }",
  "npm warn EBADENGINE }",
  "npm warn deprecated something@1.0.0: use another thing",
];

function run(lines: string[]): string[] {
  const written: string[] = [];
  const warnings = summarizeEngineWarnings((line) => written.push(line));
  for (const line of lines) warnings.line(line);
  warnings.end("v20.20.2");
  return written;
}

describe("npm ci's engine warnings at a first start (scripts/ensure-deps.mjs)", () => {
  it("come out as one line naming how many packages ask for which Node, after npm's other lines", () => {
    expect(run(NPM_CI_ON_NODE_20)).toEqual([
      "npm warn deprecated something@1.0.0: use another thing",
      "reelay: 2 of the packages reelay uses ask for Node >= 22.x or >=22.15.0 (npm's EBADENGINE warnings; this is v20.20.2). " +
        "reelay's tests pass on Node 20, 22 and 24, but Node 20 is past its end of life: prefer 22 or 24.",
    ]);
  });

  it("add nothing when npm warned of no engine", () => {
    expect(run(["added 412 packages in 9s"])).toEqual(["added 412 packages in 9s"]);
  });
});
