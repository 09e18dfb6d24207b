// reelay's layers, checked on every `npm test` (test/layering.unit.spec.ts; by hand: `npx depcruise
// contracts machines infra services`). Imports point one way (docs/architecture.md, "Layers"):
//
//   contracts ← machines ← services/shared (and infra) ← domain (services/billing, tasks, webhooks)
//             ← services (services/edge, runner, projector, console) ← services/cli
//
// - contracts: schemas and types of what crosses a boundary; import nothing of reelay's but each other.
// - machines: pure XState machines and deciders; contracts only.
// - infra: stream layout, nats-server and binaries as data and launch code; contracts only.
// - services/shared: what every service runs on (NATS, logs, metrics, projections); no domain, no service.
// - domain: an aggregate's rules and its read models and reactors; no service. Domain modules may use each
//   other (settlement in billing reads task events).
// - services: one folder per deployable service. A service never imports another service's folder: what two
//   services share belongs in a layer below them.
// - services/cli is the `reelay` command and the only wiring of services together: `reelay serve` starts
//   each service through its `main.ts` (the service's wiring: it takes NATS, config and a logger and builds
//   the service's parts), and it imports nothing else of a service's folder.
// - services/console/app is browser code: types from contracts only.
const SERVICE = "^services/(edge|runner|projector|console)/";
const DOMAIN = "^services/(billing|tasks|webhooks)/";

/** @type {import("dependency-cruiser").IConfiguration} */
export default {
  forbidden: [
    {
      name: "contracts-are-the-bottom",
      comment: "contracts import only contracts (and packages)",
      severity: "error",
      from: { path: "^contracts/" },
      to: { path: "^(machines|infra|services)/" },
    },
    {
      name: "machines-are-pure",
      comment: "machines import only contracts and machines: no I/O, no services",
      severity: "error",
      from: { path: "^machines/" },
      to: { path: "^(infra|services)/" },
    },
    {
      name: "infra-is-data",
      comment: "infra imports only contracts and infra",
      severity: "error",
      from: { path: "^infra/" },
      to: { path: "^(machines|services)/" },
    },
    {
      name: "shared-below-domain",
      comment: "services/shared is what every service runs on: it imports no domain module and no service",
      severity: "error",
      from: { path: "^services/shared/" },
      to: { path: `${DOMAIN}|${SERVICE}|^services/cli/` },
    },
    {
      name: "domain-below-services",
      comment: "domain modules (billing, tasks, webhooks) import no service and not the CLI",
      severity: "error",
      from: { path: DOMAIN },
      to: { path: `${SERVICE}|^services/cli/` },
    },
    {
      name: "services-apart",
      comment: "a service imports no other service's folder: what two services share belongs in a layer below",
      severity: "error",
      from: { path: "^services/(edge|runner|projector|console)/" },
      to: { path: "^services/(edge|runner|projector|console|cli)/", pathNot: "^services/$1/" },
    },
    {
      name: "wiring-through-main",
      comment: "services/cli wires services together through each one's main.ts, and imports nothing else of a service",
      severity: "error",
      from: { path: "^services/cli/" },
      to: { path: SERVICE, pathNot: "^services/(edge|runner|projector)/main\\.ts$" },
    },
    {
      name: "console-app-is-browser-code",
      comment: "the console's app runs in the browser: it imports types from contracts and nothing else of reelay's",
      severity: "error",
      from: { path: "^services/console/app/" },
      to: { path: "^(machines|infra|services)/", pathNot: "^services/console/app/" },
    },
    {
      name: "resolvable",
      comment: "every import names a file or package that exists (a rule cannot see what it cannot resolve)",
      severity: "error",
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: "no-circular",
      comment: "modules that import each other in a ring can only be understood (and loaded) together",
      severity: "error",
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(test|bench|scripts|dist|node_modules)/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    // Packages are resolved through their `exports`, as Node resolves them.
    enhancedResolveOptions: { extensions: [".ts", ".tsx", ".js"], exportsFields: ["exports"], conditionNames: ["import", "node", "default", "types"] },
  },
};
