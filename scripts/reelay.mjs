#!/usr/bin/env node
// The `reelay` command: reelay compiled to JavaScript (scripts/build.mjs), compiled first when the sources
// changed since the last build, so there is no build step to forget.
import module from "node:module";
import { compiledUrl, ensureBuild } from "./build.mjs";

// V8's compiled code for the 4 MB bundles kept between starts (Node 22.1 and newer; Node 20 has no such cache):
// about a quarter of a command's CPU and an eighth of `reelay serve`'s start on Node 24 (docs/benchmarks.md).
const cache = module.enableCompileCache?.();
// The service threads and child processes start with it too (they read the variable at their own start).
if (cache?.directory) process.env.NODE_COMPILE_CACHE ??= cache.directory;

await import(compiledUrl(await ensureBuild(), "services/cli/main.ts"));
