/** Request line and headers together; more is answered 431 (node:http counts both against this). */
export const MAX_HEADER_BYTES = 16 * 1024;
/** A longer request target is answered 414 before any work. */
export const MAX_URL_BYTES = 8 * 1024;
