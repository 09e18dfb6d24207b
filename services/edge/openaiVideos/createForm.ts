import busboy from "busboy";
import { RATIO_FRAME_SIZES, type Ratio } from "../../../contracts/config.ts";
import { PayloadTooLargeError, ValidationError } from "../../shared/errors.ts";
import { parseJsonBody } from "../http/request.ts";
import { readPlainMultipart, type PlainPart } from "./plainMultipart.ts";

/** A create of the OpenAI Videos API, as its SDKs send it (multipart) or as JSON. */
export interface VideoCreateForm {
  model: string;
  prompt: string;
  seconds?: number;
  size?: string;
  /** The `input_reference` file, bytes as sent (checked and stored by referenceImages.ts). */
  inputReference?: Buffer;
  /** `input_reference: {image_url}`: an image address (or data: URL) instead of a file. */
  inputReferenceUrl?: string;
}

export interface FormLimits {
  /** Largest `input_reference` file. */
  maxFileBytes: number;
  /** Largest text field (the prompt: `maxPromptChars` in UTF-8 fits). */
  maxFieldBytes: number;
}

const FIELDS = ["model", "prompt", "seconds", "size", "input_reference[image_url]", "input_reference[file_id]"] as const;
/** The 720p frame of each ratio (design.md), written as OpenAI writes sizes. */
export const SIZES = Object.fromEntries(Object.entries(RATIO_FRAME_SIZES).map(([ratio, { width, height }]) => [`${width}x${height}`, ratio as Ratio])) as Record<string, Ratio>;

const badParam = (message: string, param: string) => new ValidationError(message, { param, code: "invalid_value" });

/** `multipart/form-data` (what every OpenAI SDK sends) or `application/json`; anything else is named and refused. */
export async function readCreateForm(contentType: string, body: Buffer, limits: FormLimits): Promise<VideoCreateForm> {
  const type = contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  if (type === "application/json") return formOf(parseJsonBody(body), undefined);
  if (type === "multipart/form-data") {
    const { fields, file } = await readMultipart(contentType, body, limits, FIELDS, "input_reference");
    return formOf(fields, file);
  }
  throw wrongContentType(contentType);
}

const wrongContentType = (contentType: string) =>
  new ValidationError(`Content-Type must be multipart/form-data or application/json, got "${contentType.slice(0, 80) || "none"}"`, { code: "invalid_content_type" });

/** A remix's body: its `prompt`, and the `model` some gateways add (new-api's video channels set it on every body they relay). */
export interface RemixForm {
  prompt: string;
  model?: string;
}

const REMIX_FIELDS = ["prompt", "model"] as const;

/** A remix's body, as JSON (the Node and Python SDKs, gateways) or multipart (the Java SDK). */
export async function readRemixForm(contentType: string, body: Buffer, limits: FormLimits): Promise<RemixForm> {
  const type = contentType.split(";")[0]?.trim().toLowerCase() ?? "";
  let fields: Record<string, unknown>;
  if (type === "application/json") {
    const parsed = parseJsonBody(body);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) throw new ValidationError("request body must be a JSON object");
    fields = parsed as Record<string, unknown>;
  } else if (type === "multipart/form-data") {
    fields = (await readMultipart(contentType, body, limits, REMIX_FIELDS, undefined)).fields;
  } else throw wrongContentType(contentType);
  const unknown = Object.keys(fields).find((name) => !(REMIX_FIELDS as readonly string[]).includes(name));
  if (unknown !== undefined) throw badParam(`unknown field "${unknown.slice(0, 50)}"`, unknown.slice(0, 50));
  const { prompt, model } = fields;
  if (typeof prompt !== "string" || prompt.trim() === "") throw new ValidationError("prompt is required", { param: "prompt", code: "missing_required_parameter" });
  if (model !== undefined && typeof model !== "string") throw badParam("model must be a string", "model");
  return model === undefined ? { prompt } : { prompt, model };
}

/**
 * The parts of a multipart body: the text fields once each, at most one file (`input_reference`), each
 * within its size. A body in the plain shape the SDKs send that makes such a form is read directly; any
 * other goes to busboy, which reads it under the same limits and names what is wrong (400).
 */
function readMultipart(
  contentType: string,
  body: Buffer,
  limits: FormLimits,
  names: readonly string[],
  fileField: string | undefined,
): Promise<{ fields: Record<string, unknown>; file?: Buffer }> {
  const parts = readPlainMultipart(contentType, body, names.length + (fileField ? 1 : 0));
  const plain = parts && plainForm(parts, limits, names, fileField);
  return plain ? Promise.resolve(plain) : readWithBusboy(contentType, body, limits, names, fileField);
}

/** The form plain parts make, or undefined for anything busboy's reading would refuse (it names the problem then). */
function plainForm(parts: readonly PlainPart[], limits: FormLimits, names: readonly string[], fileField: string | undefined): { fields: Record<string, unknown>; file?: Buffer } | undefined {
  const fields: Record<string, unknown> = {};
  let file: Buffer | undefined;
  for (const part of parts) {
    if (part.isFile && part.name === fileField) {
      if (file !== undefined || part.data.length > limits.maxFileBytes) return undefined;
      file = part.data;
    } else {
      // A text field, or one sent as a file (openai-java): read as text either way.
      if (!names.includes(part.name) || part.name in fields || part.data.length > limits.maxFieldBytes) return undefined;
      fields[part.name] = part.data.toString("utf8");
    }
  }
  return { fields, ...(file === undefined ? {} : { file }) };
}

/** The parts of a multipart body, with busboy under limits. A malformed or truncated body is a 400 naming it. */
function readWithBusboy(
  contentType: string,
  body: Buffer,
  limits: FormLimits,
  names: readonly string[],
  fileField: string | undefined,
): Promise<{ fields: Record<string, unknown>; file?: Buffer }> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({
        headers: { "content-type": contentType },
        // Some libraries (openai-java) send text fields as parts with a file name: counted as files too.
        // busboy reports a limit as soon as a count reaches it, so each is one above what a valid form has.
        limits: { fields: names.length + 1, files: names.length + (fileField ? 1 : 0) + 1, parts: names.length + (fileField ? 1 : 0) + 1, fieldSize: limits.maxFieldBytes, fileSize: limits.maxFileBytes, headerPairs: 20 },
      });
    } catch (error) {
      reject(new ValidationError(`malformed multipart/form-data: ${(error as Error).message}`));
      return;
    }
    const fields: Record<string, unknown> = {};
    let file: Buffer | undefined;
    let fileSeen = false;
    let failure: Error | undefined;
    const fail = (error: Error) => (failure ??= error);
    parser.on("field", (name, value, info) => {
      if (!names.includes(name)) return fail(badParam(`unknown field "${name.slice(0, 50)}"`, name.slice(0, 50)));
      if (name in fields) return fail(badParam(`field "${name}" is given more than once`, name));
      if (info.valueTruncated) return fail(new PayloadTooLargeError(`field "${name}" is longer than ${limits.maxFieldBytes} bytes`));
      fields[name] = value;
    });
    parser.on("file", (name, stream) => {
      // A body that ends inside a file destroys its stream with busboy's error: unheard, it was an uncaught
      // exception that ended the edge's process.
      stream.on("error", (error: Error) => fail(new ValidationError(`malformed multipart/form-data: ${error.message}`)));
      const chunks: Buffer[] = [];
      if (name !== fileField && names.includes(name)) {
        // A text field sent with a file name: read as text, within the field size.
        let size = 0;
        stream.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size <= limits.maxFieldBytes) chunks.push(chunk);
        });
        stream.on("end", () => {
          if (size > limits.maxFieldBytes) return fail(new PayloadTooLargeError(`field "${name}" is longer than ${limits.maxFieldBytes} bytes`));
          if (name in fields) return fail(badParam(`field "${name}" is given more than once`, name));
          fields[name] = Buffer.concat(chunks).toString("utf8");
        });
        return;
      }
      if (name !== fileField) fail(badParam(`unknown file field "${name.slice(0, 50)}"${fileField ? ` (only ${fileField} is a file)` : ""}`, name.slice(0, 50)));
      // The form takes one file: a second would silently replace the first when its stream ends.
      else if (fileSeen) fail(badParam(`more than one ${name} file: the form takes one`, name));
      fileSeen ||= name === fileField;
      stream.on("data", (chunk: Buffer) => chunks.push(chunk));
      stream.on("limit", () => fail(new PayloadTooLargeError(`input_reference is larger than ${limits.maxFileBytes} bytes`, { param: "input_reference" })));
      stream.on("end", () => {
        if (name === fileField) file = Buffer.concat(chunks);
      });
    });
    for (const limit of ["partsLimit", "filesLimit", "fieldsLimit"] as const) {
      parser.on(limit, () => fail(new ValidationError(`too many parts: the form takes ${names.join(", ")}${fileField ? ` and one ${fileField} file` : ""}`)));
    }
    parser.on("error", (error: Error) => reject(failure ?? new ValidationError(`malformed multipart/form-data: ${error.message}`)));
    parser.on("close", () => {
      if (failure) return reject(failure);
      resolve({ fields, ...(file === undefined ? {} : { file }) });
    });
    parser.end(body);
  });
}

function formOf(fields: unknown, file: Buffer | undefined): VideoCreateForm {
  if (typeof fields !== "object" || fields === null || Array.isArray(fields)) throw new ValidationError("request body must be a JSON object");
  const given = fields as Record<string, unknown>;
  for (const name of Object.keys(given)) {
    if (!(FIELDS as readonly string[]).includes(name) && name !== "input_reference") throw badParam(`unknown field "${name.slice(0, 50)}"`, name.slice(0, 50));
  }
  const reference = given.input_reference;
  if (given["input_reference[file_id]"] !== undefined || (typeof reference === "object" && reference !== null && "file_id" in reference)) {
    throw badParam("input_reference.file_id is not supported here: send the image as a file or as input_reference.image_url", "input_reference");
  }
  const referenceUrl = given["input_reference[image_url]"] ?? (typeof reference === "object" && reference !== null ? (reference as { image_url?: unknown }).image_url : reference);
  if (referenceUrl !== undefined && (typeof referenceUrl !== "string" || referenceUrl === "")) throw badParam("input_reference must be an image file or {image_url: <URL>}", "input_reference");
  const text = (name: string): string | undefined => {
    const value = given[name];
    if (value === undefined) return undefined;
    if (typeof value !== "string") throw badParam(`${name} must be a string`, name);
    return value;
  };
  const model = text("model");
  const prompt = text("prompt");
  if (!model) throw new ValidationError("model is required", { param: "model", code: "missing_required_parameter" });
  if (prompt === undefined || prompt.trim() === "") throw new ValidationError("prompt is required", { param: "prompt", code: "missing_required_parameter" });
  const seconds = secondsOf(given.seconds);
  const size = text("size");
  if (size !== undefined && !(size in SIZES)) throw badParam(`size must be one of ${Object.keys(SIZES).join(", ")}, got "${size.slice(0, 30)}"`, "size");
  if (file !== undefined && referenceUrl !== undefined) throw badParam("input_reference is given twice (a file and an image_url)", "input_reference");
  return {
    model,
    prompt,
    ...(seconds === undefined ? {} : { seconds }),
    ...(size === undefined ? {} : { size }),
    ...(file === undefined ? {} : { inputReference: file }),
    ...(typeof referenceUrl === "string" ? { inputReferenceUrl: referenceUrl } : {}),
  };
}

/** `seconds` as the SDKs send it (a string such as "8") or as a JSON number. */
function secondsOf(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  const text = typeof value === "number" ? String(value) : value;
  if (typeof text !== "string" || !/^[1-9]\d{0,2}$/.test(text)) throw badParam(`seconds must be a whole number of seconds such as "8", got ${JSON.stringify(value).slice(0, 30)}`, "seconds");
  return Number(text);
}
