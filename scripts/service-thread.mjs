// Entry of a `reelay serve` service thread: threads do not inherit the main thread's tsx loader.
import { register } from "tsx/esm/api";

register();
await import("../services/cli/serviceThread.ts");
