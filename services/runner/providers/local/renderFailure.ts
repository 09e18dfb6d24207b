/**
 * A render that failed, in two voices: `reason` is what the customer reads on the task (clear, nothing
 * internal: no ffmpeg output, no paths, no addresses), `detail` is what operators need (ffmpeg's stderr,
 * the network error) and goes only to the log and the task's GenerationFailed event.
 */
export class RenderFailure extends Error {
  constructor(readonly reason: string, readonly detail?: string, options?: ErrorOptions) {
    super(detail ? `${reason} (${detail})` : reason, options);
  }
}
