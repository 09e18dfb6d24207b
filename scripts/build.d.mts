// Types of scripts/build.mjs for the TypeScript that calls it (the tests' set-up).
export function ensureBuild(options?: { testTools?: boolean; say?: (line: string) => void }): Promise<string>;
export function compiledUrl(dir: string, entry: string): string;
