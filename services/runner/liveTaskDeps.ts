import type { ObjectStore } from "@nats-io/obj";
import type { Logger } from "../shared/log.ts";
import type { TaskLog } from "../shared/taskLog.ts";
import type { ObjectBucket } from "./newObject.ts";
import type { ChannelPool } from "./policy/channelPool.ts";

/** What every live task of a runner gets (one object for all of them). */
export interface LiveTaskDeps {
  videos: ObjectStore;
  /** The same bucket, written directly for a task's first copy (resultCopy.ts). */
  videoBucket: ObjectBucket;
  /** The key stored videos are named with (videoNames.ts). */
  videoNameKey: Buffer;
  log: Logger;
  taskLog: TaskLog;
  /** The runner's channels: the task takes a slot on one of its model's channels before it is submitted. */
  channels: ChannelPool;
  maxTaskMs: number;
  maxResultBytes: number;
  allowPrivateResultAddresses: boolean;
  /** Aborted when the runner shuts down: no more appends or upstream calls from this point. */
  shutdown: AbortSignal;
}
