/**
 * What the system says when this process or machine is short of something for a while (open files, processes,
 * memory for a new process): a render that fails so is not the task's fault, and would succeed a moment later.
 * ENOSPC is not here: a full disk stays full until an operator acts, and the render's own output is its use.
 */
const SHORT_OF = new Set(["EMFILE", "ENFILE", "EAGAIN", "ENOMEM"]);

/** Whether `error`, or an error it was caused by, is the system being short of resources. */
export function shortOfResources(error: unknown): boolean {
  for (let at: unknown = error, depth = 0; at instanceof Error && depth < 8; at = at.cause, depth++) {
    const code = (at as NodeJS.ErrnoException).code;
    if (code !== undefined && SHORT_OF.has(code)) return true;
  }
  return false;
}
