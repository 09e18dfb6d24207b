/** What bench/createFloor.ts names its messages and keys, for the suites that load it and watch its log. */
export const FLOOR_STREAM = "FLOOR";
/** Where the instant floor's finals are (as reelay's are on `acct.*.task.*.state`). */
export const FLOOR_STATE_EVENTS = "floor.*.task.*.state";
/** The floor's API keys: `floor-<n>` is account n (it checks nothing else). */
export const floorKeys = (accounts: number): string[] => Array.from({ length: accounts }, (_, index) => `floor-${index}`);
