#!/usr/bin/env node
// The `reelay` command: reelay compiled to JavaScript (scripts/build.mjs), compiled first when the sources
// changed since the last build, so there is no build step to forget.
import { compiledUrl, ensureBuild } from "./build.mjs";

await import(compiledUrl(await ensureBuild(), "services/cli/main.ts"));
