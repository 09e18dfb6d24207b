import type { VideoJobSpec } from "../../contracts/videoTask.ts";

/** A 5 s 16:9 job on VideoModel-2.0 as the edge would normalize it. */
export const sampleJob: VideoJobSpec = {
  model: "VideoModel-2.0",
  provider: "local",
  prompt: "p",
  durationSeconds: 5,
  ratio: "16:9",
  width: 1280,
  height: 720,
  generateAudio: true,
  watermark: false,
  pricePerMillionTokens: 46,
  estimatedTokens: 108_900,
  references: {},
};
