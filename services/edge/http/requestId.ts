import { randomUUID } from "node:crypto";

/** `x-request-id` on every answer (OpenAI clients show it to users; chat usage charges are keyed by it). */
export const newRequestId = (): string => `req_${randomUUID().replaceAll("-", "")}`;
