/**
 * Crash tests need a process to die at an exact point (say, after a charge is written but before its
 * cause is acknowledged). REELAY_FAILPOINTS=name[,name] makes `failpoint(name)` kill this process with
 * SIGKILL there — no cleanup, exactly like a power cut. Unset in production, it costs one Set lookup.
 */
const armed = new Set((process.env.REELAY_FAILPOINTS ?? "").split(",").filter(Boolean));

export function failpoint(name: string): void {
  if (armed.has(name)) process.kill(process.pid, "SIGKILL");
}
