/** Request line and headers together; more is answered 431 (node:http counts both against this). */
export const MAX_HEADER_BYTES = 16 * 1024;
/** A longer request target is answered 414 before any work. */
export const MAX_URL_BYTES = 8 * 1024;
/**
 * Header fields per request (Apache's LimitRequestFields default): browsers and SDKs send 10-30. More is
 * answered 431; node:http alone silently keeps the first 2,000 and serves the request.
 */
export const MAX_HEADER_COUNT = 100;
