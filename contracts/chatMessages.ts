import { z } from "zod";
import { shownInput } from "./shownInput.ts";

/**
 * Chat messages as OpenAI validates them, so a request that OpenAI would refuse is refused here with a 400
 * naming the field (`messages[2].role`), instead of reaching an upstream or echoing garbage. Fields beyond
 * these are passed through untouched (new OpenAI parameters keep working).
 */

export const CHAT_ROLES = ["system", "developer", "user", "assistant", "tool", "function"] as const;
const listed = (values: readonly string[]) =>
  values.length === 1 ? `'${values[0]}'` : `${values.slice(0, -1).map((v) => `'${v}'`).join(", ")} and '${values.at(-1)}'`;

const TextPart = z.looseObject({ type: z.literal("text"), text: z.string({ error: "text must be a string" }) });
const ImagePart = z.looseObject({
  type: z.literal("image_url"),
  image_url: z.looseObject({ url: z.string({ error: "image_url.url must be a string" }) }, { error: "image_url must be an object with a url" }),
});
const AudioPart = z.looseObject({ type: z.literal("input_audio"), input_audio: z.looseObject({ data: z.string(), format: z.string() }) });
const FilePart = z.looseObject({ type: z.literal("file"), file: z.looseObject({}) });
const RefusalPart = z.looseObject({ type: z.literal("refusal"), refusal: z.string() });

const unsupportedPart = (names: readonly string[]) => (issue: z.core.$ZodRawIssue) =>
  issue.code === "invalid_union" ? `Invalid content part type. Supported values are: ${listed(names)}.` : undefined;

const userPart = z.discriminatedUnion("type", [TextPart, ImagePart, AudioPart, FilePart], {
  error: unsupportedPart(["text", "image_url", "input_audio", "file"]),
});
const textPart = z.discriminatedUnion("type", [TextPart], { error: unsupportedPart(["text"]) });
const assistantPart = z.discriminatedUnion("type", [TextPart, RefusalPart], { error: unsupportedPart(["text", "refusal"]) });

/** A string, or a non-empty array of parts each checked on its own (so an error names the part: content[1].type). */
const contentOf = (part: z.ZodType) =>
  z.unknown().superRefine((value, ctx) => {
    if (typeof value === "string") return;
    if (!Array.isArray(value) || value.length === 0) {
      ctx.addIssue({ code: "custom", message: "content must be a string or a non-empty array of content parts" });
      return;
    }
    value.forEach((item: unknown, index) => {
      const checked = part.safeParse(item);
      for (const issue of checked.error?.issues ?? []) ctx.addIssue({ code: "custom", message: issue.message, path: [index, ...issue.path] });
    });
  });

const ToolCall = z.looseObject({
  id: z.string({ error: "id must be a string" }),
  type: z.literal("function", { error: "type must be 'function'" }),
  function: z.looseObject({ name: z.string({ error: "name must be a string" }), arguments: z.string({ error: "arguments must be a string" }) }),
});

const SystemMessage = z.looseObject({ role: z.literal(["system", "developer"]), content: contentOf(textPart) });
const UserMessage = z.looseObject({ role: z.literal("user"), content: contentOf(userPart) });
const AssistantMessage = z
  .looseObject({
    role: z.literal("assistant"),
    content: z.union([z.null(), contentOf(assistantPart)]).optional(),
    tool_calls: z.array(ToolCall).nullish(),
    function_call: z.looseObject({ name: z.string(), arguments: z.string() }).nullish(),
  })
  .refine((message) => message.content != null || message.tool_calls != null || message.function_call != null, {
    message: "content is required unless tool_calls or function_call is set",
    path: ["content"],
  });
const ToolMessage = z.looseObject({
  role: z.literal("tool"),
  content: contentOf(textPart),
  tool_call_id: z.string({ error: "tool_call_id is required for tool messages" }),
});
const FunctionMessage = z.looseObject({ role: z.literal("function"), name: z.string({ error: "name is required" }), content: z.string().nullable() });

export const ChatMessage = z.discriminatedUnion("role", [SystemMessage, UserMessage, AssistantMessage, ToolMessage, FunctionMessage], {
  error: (issue) => {
    if (issue.code !== "invalid_union") return undefined;
    const role = (issue.input as { role?: unknown } | undefined)?.role;
    return `Invalid value: ${shownInput(JSON.stringify(role ?? null), 100)}. Supported values are: ${listed(CHAT_ROLES)}.`;
  },
});
export type ChatMessage = z.infer<typeof ChatMessage>;
