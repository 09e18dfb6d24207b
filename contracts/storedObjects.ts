/**
 * Names of what reelay keeps in its object stores, shared by the runner that stores a video and the edge
 * routes that serve it: a name the routes would refuse must never be stored for a task that succeeds.
 */

/** A video the edge serves at `/videos/<name>` (and through `/videos/{id}/content`); at most 204 characters. */
export const SERVABLE_VIDEO_NAME = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}\.mp4$/;

/** Reference images customers uploaded (OpenAI's `input_reference`), served at `/references/<name>`. */
export const REFERENCE_NAME = /^ref-[0-9a-f-]{36}\.(png|jpg|gif|webp)$/;
