import { randomBytes } from "node:crypto";

/**
 * What two OpenAI-speaking gateways send to an OpenAI Videos upstream, written down from their source
 * (not guessed), so a test can replay it against a real reelay:
 *
 * new-api (QuantumNous/new-api), its Sora/OpenAI video channel, given a channel base URL (`http://host:port`):
 * - relay/channel/task/sora/adaptor.go `BuildRequestURL`: create `POST {base}/v1/videos`, remix
 *   `POST {base}/v1/videos/{upstream id}/remix`; `BuildRequestHeader`: `Authorization: Bearer <key>` and the
 *   client's Content-Type. `BuildRequestBody`: a JSON body is relayed with `model` replaced by the channel's
 *   model name (and `group` dropped) — the remix body too; a multipart body is rewritten with Go's
 *   mime/multipart writer, `model` first, then the other fields, then each file as
 *   `form-data; name="<field>"; filename="<name>"` with its (sniffed) Content-Type.
 *   `DoResponse` takes `id` (or `task_id`) from the answer; `ParseTaskResult` reads `status`
 *   (`queued`/`in_progress`/`completed`/`failed`, any case), `progress` as an integer, `error.message`.
 * - `FetchTask`: `GET {base}/v1/videos/{upstream id}` with only `Authorization: Bearer <key>`.
 * - controller/video_proxy.go (channel types OpenAI and Sora): the video is fetched from
 *   `GET {base}/v1/videos/{upstream id}/content` with `Authorization: Bearer <key>`.
 *
 * LiteLLM (BerriAI/litellm), its OpenAI video provider (litellm/llms/openai/videos/transformation.py), given
 * `api_base` (`http://host:port/v1`): `Authorization: Bearer <key>`; create `POST {api_base}/videos` with
 * httpx form fields `model`, `prompt`, `seconds`, `size` and the file `input_reference` (named
 * `input_reference.png` when LiteLLM was handed bytes); status `GET {api_base}/videos/{id}`; content
 * `GET {api_base}/videos/{id}/content?video_id={id}`; list `GET {api_base}/videos?after&limit&order`; remix
 * `POST {api_base}/videos/{id}/remix` with `{"prompt"}`; delete `DELETE {api_base}/videos/{id}`.
 * LiteLLM's proxy (litellm/proxy/video_endpoints/endpoints.py) serves POST/GET `/v1/videos`,
 * GET `/v1/videos/{id}`, GET `/v1/videos/{id}/content`, POST `/v1/videos/{id}/remix` (and characters,
 * edits, extensions) but no DELETE: a reelay relaying to it cannot delete the upstream's copy.
 */

export interface LoggedRequest {
  method: "GET" | "POST" | "DELETE";
  /** Relative to the gateway's configured base (new-api: `http://host:port`; LiteLLM: `http://host:port/v1`). */
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
}

export interface FormFile {
  name: string;
  filename: string;
  type: string;
  bytes: Buffer;
}

/** A multipart body as Go's mime/multipart Writer writes it (new-api): 30 random bytes as the boundary. */
export function goMultipart(fields: Array<[string, string]>, files: FormFile[]): { body: Buffer; contentType: string } {
  const boundary = randomBytes(30).toString("hex");
  const parts = [
    ...fields.map(([name, value]) => ({ head: `Content-Disposition: form-data; name="${name}"`, bytes: Buffer.from(value) })),
    ...files.map((file) => ({ head: `Content-Disposition: form-data; name="${file.name}"; filename="${file.filename}"\r\nContent-Type: ${file.type}`, bytes: file.bytes })),
  ];
  // Go writes the first delimiter without a leading CRLF, each later one after one, and the close after the last part.
  const chunks = parts.flatMap((part, i) => [Buffer.from(`${i === 0 ? "" : "\r\n"}--${boundary}\r\n${part.head}\r\n\r\n`), part.bytes]);
  return { body: Buffer.concat([...chunks, Buffer.from(`\r\n--${boundary}--\r\n`)]), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** A multipart body as httpx writes it (LiteLLM): data fields, then files; 16 random bytes as the boundary. */
export function httpxMultipart(fields: Array<[string, string]>, files: FormFile[]): { body: Buffer; contentType: string } {
  const boundary = randomBytes(16).toString("hex");
  const part = (head: string, bytes: Buffer) => [Buffer.from(`--${boundary}\r\n${head}\r\n\r\n`), bytes, Buffer.from("\r\n")];
  const chunks = [
    ...fields.flatMap(([name, value]) => part(`Content-Disposition: form-data; name="${name}"`, Buffer.from(value))),
    ...files.flatMap((file) => part(`Content-Disposition: form-data; name="${file.name}"; filename="${file.filename}"\r\nContent-Type: ${file.type}`, file.bytes)),
  ];
  return { body: Buffer.concat([...chunks, Buffer.from(`--${boundary}--\r\n`)]), contentType: `multipart/form-data; boundary=${boundary}` };
}

/** The headers Go's net/http client adds to every request new-api makes. */
export const goHeaders = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}`, "user-agent": "Go-http-client/1.1", "accept-encoding": "gzip" });

/** The headers LiteLLM's httpx client sends with every request. */
export const httpxHeaders = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}`, accept: "*/*", "accept-encoding": "gzip, deflate", "user-agent": "litellm" });

/** Sends one logged request to `base`; the answer's status, headers and body as bytes. */
export async function replay(base: string, request: LoggedRequest): Promise<{ status: number; headers: Headers; body: Buffer }> {
  const response = await fetch(`${base}${request.path}`, { method: request.method, headers: request.headers, ...(request.body ? { body: new Uint8Array(request.body) } : {}) });
  return { status: response.status, headers: response.headers, body: Buffer.from(await response.arrayBuffer()) };
}
