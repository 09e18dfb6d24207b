import { MissingProgramError } from "../../infra/binaries.ts";
import { EmbeddedServerTakenError } from "../../infra/natsServer.ts";
import { UnsupportedNatsServerError } from "../../infra/natsServerVersion.ts";
import { ConfigError } from "../shared/config.ts";
import { ReelayError } from "../shared/errors.ts";
import { NatsUnreachableError } from "./natsContext.ts";

/**
 * An error reelay raises on purpose for the operator to fix (a setting, a program, the server, the arguments):
 * its message says what to do, and a stack trace under it would only bury that.
 */
export function isOperatorError(error: unknown): error is Error {
  const badArguments = String((error as { code?: unknown })?.code ?? "").startsWith("ERR_PARSE_ARGS");
  return (
    error instanceof ConfigError ||
    error instanceof MissingProgramError ||
    error instanceof UnsupportedNatsServerError ||
    error instanceof NatsUnreachableError ||
    error instanceof EmbeddedServerTakenError ||
    error instanceof ReelayError ||
    badArguments
  );
}
