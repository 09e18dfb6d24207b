/**
 * What the live task machine costs the runner's thread per task life, without NATS, a provider or the
 * interpreter's calls: `node --import tsx bench/tools/liveTaskMachineCost.ts [lives] [rounds]` (default
 * 20,000 lives, 5 rounds). Each life is the shortest one, the instant provider's: created → slot → submitted →
 * acceptance appended → first poll due → succeeded → copied → success appended → forgotten. The machine is
 * stepped as the interpreter steps it (services/runner/liveTask.ts): `getInitialSnapshot` and `transition`
 * with one shared scope that collects the actions instead of running them, a delayed event delivered at once.
 * The answers are built once, so what is timed is the machine: its transitions, guards, assigns and snapshots.
 * Prints µs (wall clock, and the process's CPU time, collector threads included) and bytes allocated per life
 * for each round (the heap's growth plus what each collection in the round freed, from v8.GCProfiler), then
 * the median round, beside xstate's floor measured in the same run: a machine of two states, no guards,
 * actions or context, stepped as many times per life the same way. What is above the floor is this machine's.
 */
import { GCProfiler, getHeapStatistics } from "node:v8";
import { createActor, createMachine, type ActorScope, type ExecutableActionsFrom, type SnapshotFrom } from "xstate";
import type { StoredVideo } from "../../contracts/videoTask.ts";
import { inertScope } from "../../machines/inertScope.ts";
import { liveTaskMachine } from "../../machines/liveTask.ts";
import type { LiveTaskEffect, LiveTaskEvent, LiveTaskInput } from "../../machines/liveTaskTypes.ts";
import { decideTaskSteps, foldTask, type TaskCommand, type TaskDeciderState } from "../../machines/videoTaskDecider.ts";
import { openingEvent } from "../../test/helpers/openTask.ts";

type Snapshot = SnapshotFrom<typeof liveTaskMachine>;
type Action = ExecutableActionsFrom<typeof liveTaskMachine>;

const lives = Number(process.argv[2] ?? 20_000);
const rounds = Number(process.argv[3] ?? 5);
const WARM_UP_LIVES = 5_000;

const opening = openingEvent("acme", 7, { maxTaskMs: 15 * 60_000 });
const firstState = foldTask([opening]);
const POLICY = { pollFirstAfterMs: 0, pollEveryMs: 10, pollMaxEveryMs: 10 };
const VIDEO: StoredVideo = { object: "v.mp4", bytes: 10, contentType: "video/mp4" };
const DONE_UPSTREAM = { state: "succeeded" as const, result: { kind: "url" as const, url: "https://cdn.example/v.mp4" } };

/** The log's state after each append of the instant life, as the decider leaves it (computed once, not timed). */
const appendedStates = new Map<TaskCommand["type"], LiveTaskEvent>();
function appendedAnswer(command: TaskCommand, state: TaskDeciderState): LiveTaskEvent {
  let after = state;
  for (const step of decideTaskSteps(command, state)) after = step.after;
  return { type: "APPENDED", task: after, sequence: after.version };
}

const SLOT: LiveTaskEvent = { type: "SLOT", channel: "instant", policy: POLICY, waitedMs: 0 };
const SUBMITTED: LiveTaskEvent = { type: "SUBMITTED", providerTaskId: "video_1" };
const STATUS: LiveTaskEvent = { type: "STATUS", status: DONE_UPSTREAM };
const COPIED: LiveTaskEvent = { type: "COPIED", video: VIDEO };
const DONE: LiveTaskEvent = { type: "DONE" };

let collected: Action[] = [];
let scope: ActorScope<Snapshot, LiveTaskEvent> | undefined;
/** The interpreter's one scope for every task (made with the first task's input: the machine's `self` needs one). */
function scopeFor(input: LiveTaskInput): ActorScope<Snapshot, LiveTaskEvent> {
  if (scope) return scope;
  scope = inertScope(createActor(liveTaskMachine, { input }), (action) => void collected.push(action as Action));
  return scope;
}

/** The instant provider's answer to what the machine asked for (undefined: nothing to answer). */
function answer(action: Action, state: TaskDeciderState): LiveTaskEvent | undefined {
  const type: string = action.type;
  if (type === "xstate.raise") return (action.params as { event: LiveTaskEvent; delay?: number }).event;
  if (type !== "effect") return undefined;
  const effect = action.params as LiveTaskEffect;
  switch (effect.do) {
    case "acquire":
      return SLOT;
    case "submit":
      return SUBMITTED;
    case "status":
      return STATUS;
    case "copy":
      return COPIED;
    case "forget":
      return DONE;
    case "append": {
      let appended = appendedStates.get(effect.command.type);
      if (appended === undefined) {
        appended = appendedAnswer(effect.command, state);
        appendedStates.set(effect.command.type, appended);
      }
      return appended;
    }
    default:
      return undefined;
  }
}

function taskLife(): number {
  const input: LiveTaskInput = { taskId: 7, account: "acme", job: opening.data.job, deadlineAt: Date.parse(opening.data.deadlineAt), maxTaskMs: 15 * 60_000, redelivered: false, task: firstState, now: Date.now, jitter: Math.random() };
  collected = [];
  const lifeScope = scopeFor(input);
  let snapshot = liveTaskMachine.getInitialSnapshot(lifeScope, input);
  let steps = 1;
  const pending: LiveTaskEvent[] = [];
  for (;;) {
    const actions = collected;
    collected = [];
    for (const action of actions) {
      const event = answer(action, snapshot.context.task);
      if (event !== undefined) pending.push(event);
    }
    const next = pending.shift();
    if (next === undefined || snapshot.status !== "active") break;
    snapshot = liveTaskMachine.transition(snapshot, next, lifeScope);
    steps++;
  }
  if (snapshot.status !== "done" || snapshot.output !== "final") throw new Error(`a life ended ${snapshot.status} in ${JSON.stringify(snapshot.value)}, not final`);
  return steps;
}

/** xstate's own cost per step, whatever the machine: two states that send each other back and forth. */
const floorMachine = createMachine({ id: "floor", initial: "a", states: { a: { on: { GO: "b" } }, b: { on: { GO: "a" } } } });
const GO = { type: "GO" } as const;
const floorScope = inertScope(createActor(floorMachine));
let stepsPerLife = 0;

function floorLife(): number {
  let snapshot = floorMachine.getInitialSnapshot(floorScope);
  for (let step = 1; step < stepsPerLife; step++) snapshot = floorMachine.transition(snapshot, GO, floorScope);
  return stepsPerLife;
}

interface Round {
  usPerLife: number;
  cpuUsPerLife: number;
  bytesPerLife: number;
  steps: number;
}

function round(count: number, life: () => number): Round {
  const profiler = new GCProfiler();
  profiler.start();
  const heapBefore = getHeapStatistics().used_heap_size;
  const cpuBefore = process.cpuUsage();
  const started = process.hrtime.bigint();
  let steps = 0;
  for (let i = 0; i < count; i++) steps = life();
  const elapsedNs = Number(process.hrtime.bigint() - started);
  const cpu = process.cpuUsage(cpuBefore);
  const heapAfter = getHeapStatistics().used_heap_size;
  const collections = profiler.stop()?.statistics ?? [];
  const freed = collections.reduce((sum, gc) => sum + gc.beforeGC.heapStatistics.usedHeapSize - gc.afterGC.heapStatistics.usedHeapSize, 0);
  return { usPerLife: elapsedNs / 1000 / count, cpuUsPerLife: (cpu.user + cpu.system) / count, bytesPerLife: (heapAfter - heapBefore + freed) / count, steps };
}

stepsPerLife = round(WARM_UP_LIVES, taskLife).steps;
round(WARM_UP_LIVES, floorLife);
// Alternating, so a slow spell of the machine falls on both.
const results = Array.from({ length: rounds }, () => ({ task: round(lives, taskLife), floor: round(lives, floorLife) }));
const describe = (r: Round) => `${r.usPerLife.toFixed(2)} µs (CPU ${r.cpuUsPerLife.toFixed(2)} µs), ${Math.round(r.bytesPerLife)} bytes allocated per life`;
for (const [i, { task, floor }] of results.entries()) process.stdout.write(`round ${i + 1}: ${describe(task)} (${task.steps} steps); xstate's floor: ${describe(floor)}\n`);
const medianOf = (pick: (r: { task: Round; floor: Round }) => Round) => [...results.map(pick)].sort((a, b) => a.usPerLife - b.usPerLife)[Math.floor(rounds / 2)];
const [task, floor] = [medianOf((r) => r.task), medianOf((r) => r.floor)];
if (task && floor) {
  process.stdout.write(`median of ${rounds} rounds of ${lives} lives: ${describe(task)}\n`);
  process.stdout.write(`xstate's floor, ${stepsPerLife} steps of a two-state machine: ${describe(floor)} (the task machine: ${(task.usPerLife / floor.usPerLife).toFixed(2)}× its time, ${(task.bytesPerLife / floor.bytesPerLife).toFixed(2)}× its bytes)\n`);
}
