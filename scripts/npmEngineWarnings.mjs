// npm's EBADENGINE warnings, one line in all (scripts/ensure-deps.mjs). npm prints each as a block:
//   npm warn EBADENGINE Unsupported engine {
//   npm warn EBADENGINE   package: '@opentelemetry/core@3.1.0',
//   npm warn EBADENGINE   required: { node: '>=22.15.0' },
//   npm warn EBADENGINE   current: { node: 'v20.20.2', npm: '11.19.1' }
//   npm warn EBADENGINE }

const ENGINE_WARNING = /^npm warn EBADENGINE\b/i;
const PACKAGE = /package: '([^']+)'/;
const REQUIRED_NODE = /required: \{.*node: '([^']+)'/;

/**
 * Passes every other line to `write` as it comes; `end` writes the summary of the engine warnings held back
 * (nothing when there were none): how many packages, which Node each asks for, and which Node this is.
 */
export function summarizeEngineWarnings(write) {
  const wanted = new Map();
  let current;
  return {
    line(text) {
      if (!ENGINE_WARNING.test(text)) return write(text);
      const name = PACKAGE.exec(text)?.[1];
      if (name !== undefined) current = name;
      const node = REQUIRED_NODE.exec(text)?.[1];
      if (node !== undefined && current !== undefined) wanted.set(current, node);
    },
    end(nodeVersion) {
      if (wanted.size === 0) return;
      const ranges = [...new Set(wanted.values())].join(" or ");
      write(
        `reelay: ${wanted.size} of the packages reelay uses ask for Node ${ranges} (npm's EBADENGINE warnings; this is ${nodeVersion}). ` +
          "reelay's tests pass on Node 20, 22 and 24, but Node 20 is past its end of life: prefer 22 or 24.",
      );
    },
  };
}
