import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../../../infra/packageRoot.ts";

const APP_DIR = `${join(PACKAGE_ROOT, "services", "console", "app")}/`;

export interface ConsoleAssets {
  html: string;
  js: Uint8Array;
  css: string;
}

const HTML = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>reelay console</title>
    <link rel="stylesheet" href="console.css" />
  </head>
  <body>
    <div id="app"></div>
    <script type="module" src="app.js"></script>
  </body>
</html>
`;

/**
 * The console (services/console/app: Preact, TSX), bundled with esbuild in memory when the edge starts: no
 * build step to forget, nothing generated on disk, nothing fetched from a CDN (it works offline).
 */
export async function bundleConsole(): Promise<ConsoleAssets> {
  // Loaded here, not at the top: esbuild stays outside reelay's bundles (scripts/build.mjs), and a static import
  // there would load it in every `reelay` command and service thread, console or not.
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [`${APP_DIR}main.tsx`],
    bundle: true,
    write: false,
    format: "esm",
    target: "es2022",
    minify: true,
    jsx: "automatic",
    jsxImportSource: "preact",
    logLevel: "silent",
  });
  const js = result.outputFiles[0]?.contents;
  if (!js) throw new Error("the console bundle came out empty");
  return { html: HTML, js, css: await readFile(`${APP_DIR}console.css`, "utf8") };
}
