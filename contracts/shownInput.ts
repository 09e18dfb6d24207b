/**
 * A client's value as an error message shows it: its first `length` characters. Errors name what was sent,
 * and a body may hold a value of up to its whole size, which the answer would otherwise repeat.
 */
export const shownInput = (value: unknown, length: number): string => String(value).slice(0, length);
