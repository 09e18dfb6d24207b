// Types of scripts/npmEngineWarnings.mjs for its test.
export function summarizeEngineWarnings(write: (line: string) => void): { line(text: string): void; end(nodeVersion: string): void };
