/** The services `reelay serve` can run (all three by default). */
export const SERVICES = ["edge", "runner", "projector"] as const;
export type ServiceName = (typeof SERVICES)[number];
