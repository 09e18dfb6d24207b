/** A single `Range: bytes=…` request resolved against a body size (RFC 9110 §14). */
export type RangeDecision =
  | { kind: "whole" }
  | { kind: "partial"; start: number; end: number }
  | { kind: "unsatisfiable" };

export function decideRange(header: string, size: number): RangeDecision {
  // Range unit names are case-insensitive and OWS may follow "=" (RFC 9110 §14.1, erratum 7306).
  const match = /^bytes=[ \t]*(\d*)-(\d*)$/i.exec(header.trim());
  // Absent, malformed or multi-range headers may be ignored: the whole body is a valid answer.
  if (!match) return { kind: "whole" };
  const [, first = "", last = ""] = match;
  if (first === "" && last === "") return { kind: "whole" };
  if (first === "") {
    const suffix = Number(last);
    if (suffix === 0) return { kind: "unsatisfiable" };
    // An empty body has no byte a Content-Range could name; the whole (empty) body is the answer.
    if (size === 0) return { kind: "whole" };
    return { kind: "partial", start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  if (start >= size) return { kind: "unsatisfiable" };
  const end = last === "" ? size - 1 : Math.min(Number(last), size - 1);
  if (end < start) return { kind: "whole" };
  return { kind: "partial", start, end };
}
