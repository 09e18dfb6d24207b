import type { StateValue } from "xstate";
import type { TaskSubmittedEvent, VideoJobSpec } from "../../contracts/videoTask.ts";
import { liveTaskMachine } from "../../machines/liveTask.ts";
import type { LiveTaskContext, LiveTaskEffect, LiveTaskEvent, LiveTaskExit, LiveTaskInput } from "../../machines/liveTaskTypes.ts";
import { isFinal } from "../../machines/videoTask.ts";
import { foldTask, initialTaskState, taskOf, type TaskDeciderState } from "../../machines/videoTaskDecider.ts";
import type { Logger } from "../shared/log.ts";
import { runCall, slotAtOnce, type TaskCalls } from "./liveTaskCalls.ts";
import type { LiveTaskDeps } from "./liveTaskDeps.ts";
import { firstStep, nextStep, takeActions, type LiveTaskAction, type LiveTaskSnapshot as Snapshot } from "./liveTaskStep.ts";
import type { ChannelLease } from "./policy/channelPool.ts";

/** What a task waiting long keeps of its snapshot: xstate's `resolveState` makes the snapshot again when it wakes. */
type Parked = { value: StateValue; context: LiveTaskContext };

/** The reason the calls of an actor that ended are aborted with (one object: nothing is built per task). */
const ACTOR_ENDED = new Error("the task's actor ended");
/** Why a call the task's deadline cut short was aborted (bounded tells it from a single call's timeout by it). */
const DEADLINE_PASSED = new DOMException("the task's deadline passed", "TimeoutError");
/**
 * No upstream call starts with less than this left before the deadline: it could not finish, and a submit
 * started then may still create the task upstream. A timer meant for just past the deadline (a backoff, the
 * next poll) can fire this early by the wall clock: libuv schedules from the loop's cached time, stale by the
 * work the loop did before it, and on a busy runner that is milliseconds.
 */
const CALL_MIN_REMAINING_MS = 50;
/** A wait at least this long parks the task (thousands of waiting tasks would each hold a snapshot and a call signal). */
const LONG_PAUSE_MS = 1_000;
const RANDOM_JITTER = (): number => Math.random();
const CLOCK = (): number => Date.now();

/** What the runner hears from its live tasks: one object for all of them (no closures per task). */
export interface LiveTaskHooks {
  /** The task left this runner (final, stepped aside or stopped). */
  exited(actor: LiveTaskActor, exit: LiveTaskExit): void;
  /** The machine threw: a bug, not a fault it handles. The actor is dead. */
  crashed(actor: LiveTaskActor, error: unknown): void;
  /** Runs one of the task's calls (inside the task's trace span). */
  run<T>(actor: LiveTaskActor, call: () => Promise<T>): Promise<T>;
}

/**
 * The interpreter of one live task's machine (machines/liveTask.ts) on NATS: it keeps the machine's snapshot,
 * runs the effects it asks for (log reads and guarded appends, provider calls, the channel pool) and answers
 * with their events. A waiting task is its state value, its context and one timer: no call chain, no promise,
 * no signal.
 */
export class LiveTaskActor implements TaskCalls {
  readonly taskId: number;
  readonly account: string;
  readonly job: VideoJobSpec;
  lease: ChannelLease | undefined;
  /** The machine's snapshot, undefined before the start and while the task is parked. */
  private snapshot: Snapshot | undefined;
  private parked: Parked | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** The signal of the task's calls (one at a time), renewed after a timeout fired it or a long wait dropped it. */
  private calls: AbortController | undefined;
  /** Calls under way: at the end the signal is aborted only when one is (an abort builds and dispatches an event). */
  private running = 0;
  /** Events sent while one is being handled (rare: most events arrive from timers and calls, one at a time). */
  private queue: LiveTaskEvent[] | undefined;
  private stepping = false;
  private exited = false;
  private taskLogger: Logger | undefined;
  /** The task's first event folded, until the machine holds the task's state (then only the snapshot keeps it). */
  private first: TaskDeciderState | undefined;
  readonly deadlineAt: number;

  constructor(
    submitted: TaskSubmittedEvent,
    readonly deps: LiveTaskDeps,
    private readonly hooks: LiveTaskHooks,
  ) {
    this.taskId = submitted.meta.taskId;
    this.account = submitted.data.account;
    this.job = submitted.data.job;
    this.deadlineAt = Date.parse(submitted.data.deadlineAt);
    this.first = foldTask([submitted]);
  }

  get log(): Logger {
    this.taskLogger ??= this.deps.log.child({ taskId: this.taskId });
    return this.taskLogger;
  }

  get decided(): TaskDeciderState {
    return (this.snapshot ?? this.parked)?.context.task ?? this.first ?? initialTaskState();
  }

  get sequence(): number {
    return (this.snapshot ?? this.parked)?.context.sequence ?? 0;
  }

  /** Starts the machine: `redelivered` when another runner may have held the task (its log is read first). */
  start(redelivered: boolean): void {
    const { taskId, account, job, deadlineAt } = this;
    // A first delivery takes a slot free at once with it: the machine then starts at the submit, a step fewer.
    const slot = redelivered ? undefined : slotAtOnce(this, { do: "acquire" });
    const input: LiveTaskInput = { taskId, account, job, deadlineAt, maxTaskMs: this.deps.maxTaskMs, redelivered, task: this.decided, now: CLOCK, jitter: RANDOM_JITTER(), ...(slot === undefined ? {} : { slot }) };
    this.first = undefined;
    this.stepping = true;
    try {
      this.snapshot = firstStep(input);
      this.settle();
    } catch (error) {
      // The runner hands the job back (its `crashed`): the dead actor lets go of what it holds first.
      this.letGo();
      throw error;
    }
    this.stepping = false;
    const queued = this.queue?.shift();
    if (queued !== undefined) this.send(queued);
  }

  /** Feeds one event to the machine (queued when it arrives while another is being handled). */
  send(event: LiveTaskEvent): void {
    if (this.stepping) {
      (this.queue ??= []).push(event);
      return;
    }
    // Left set when a transition throws: the actor is dead then, and what it is sent stays queued.
    this.stepping = true;
    for (let next: LiveTaskEvent | undefined = event; next !== undefined; next = this.queue?.shift()) {
      const snapshot = this.awake();
      if (snapshot?.status !== "active") break;
      this.snapshot = nextStep(snapshot, next);
      this.settle();
    }
    this.queue = undefined;
    this.stepping = false;
  }

  /** Ends the task's waits and calls at once (the runner calls it on shutdown). */
  stop(): void {
    this.send({ type: "STOP" });
    this.calls?.abort(ACTOR_ENDED);
  }

  /** The upstream said there is news (a callback): a task waiting for its next poll asks now. */
  poke(): void {
    this.send({ type: "POKE" });
  }

  /**
   * Whether the runner may hand the task back to the queue now with nothing lost or done twice: it waits for
   * its first slot here, holds none and has made no upstream call (services/runner/intake.ts).
   */
  evictable(): boolean {
    const snapshot = this.snapshot;
    return snapshot?.status === "active" && this.lease === undefined && snapshot.context.attempt === 0 && snapshot.matches("slot");
  }

  /** Where the task stands, for metrics ("unsubmitted" counts as pending: that is what its customer sees). */
  progress(now: number): { state: "pending" | "running"; pastDeadline: boolean } {
    const task = taskOf(this.decided);
    return { state: task.status === "running" ? "running" : "pending", pastDeadline: !isFinal(task) && now > this.deadlineAt };
  }

  outcome(): "success" | "failed" | undefined {
    const { status } = taskOf(this.decided);
    return status === "success" || status === "failed" ? status : undefined;
  }

  /** The channel this task runs on (or will be asked about), for metrics and the channels report. */
  channel(): string {
    const task = taskOf(this.decided);
    return this.lease?.channel ?? (task.status === "unsubmitted" ? undefined : task.channel) ?? this.job.provider;
  }

  providerTaskId(): string | undefined {
    const task = taskOf(this.decided);
    return task.status === "unsubmitted" ? undefined : task.providerTaskId;
  }

  /** Runs `call` bounded by the task's deadline and by `limitMs` (a single call's timeout); undefined past the deadline (or too near it to start). */
  async bounded<T>(call: (signal: AbortSignal) => Promise<T>, limitMs = Number.POSITIVE_INFINITY): Promise<T | undefined> {
    const remaining = this.deadlineAt - Date.now();
    if (remaining < CALL_MIN_REMAINING_MS) return undefined;
    if (this.calls === undefined || this.calls.signal.aborted) {
      this.calls = new AbortController();
      if (this.exited || this.snapshot?.status === "done") this.calls.abort(ACTOR_ENDED);
    }
    const calls = this.calls;
    const deadlineFirst = remaining <= limitMs;
    const timer = setTimeout(() => calls.abort(deadlineFirst ? DEADLINE_PASSED : new DOMException("the call took too long", "TimeoutError")), Math.min(remaining, limitMs));
    this.running++;
    try {
      return await call(calls.signal);
    } catch (error) {
      const active = this.parked !== undefined || this.snapshot?.status === "active";
      // The deadline's own timer may fire a moment before the wall clock reaches it (libuv's loop time is cached):
      // its abort is the deadline, whatever Date.now() says, or a submit it cut short would count as a failed one.
      const pastDeadline = calls.signal.reason === DEADLINE_PASSED || Date.now() >= this.deadlineAt;
      if (!active || !pastDeadline) throw error;
      return undefined;
    } finally {
      this.running--;
      clearTimeout(timer);
    }
  }

  /**
   * A task that waits long keeps no signal and no snapshot meanwhile (the next call makes a new signal; the next
   * event, the snapshot): thousands of tasks wait at once, and a snapshot's own objects (its state nodes, tags,
   * history) are a seventh of a waiting task's heap (bench/tools/waitingTaskHeap.ts).
   */
  private park(): void {
    this.calls = undefined;
    const snapshot = this.snapshot;
    if (snapshot?.status !== "active") return;
    this.parked = { value: snapshot.value, context: snapshot.context };
    this.snapshot = undefined;
  }

  /** The snapshot, made again from the parked state when the task was waiting. */
  private awake(): Snapshot | undefined {
    if (this.parked !== undefined) {
      this.snapshot = liveTaskMachine.resolveState(this.parked);
      this.parked = undefined;
    }
    return this.snapshot;
  }

  /** Runs what the last transition asked for; a machine that reached its end hands the task back to the runner. */
  private settle(): void {
    for (const action of takeActions()) this.execute(action);
    const snapshot = this.snapshot;
    if (snapshot?.status === "done" && !this.exited) {
      this.exited = true;
      clearTimeout(this.timer);
      this.lease?.release();
      this.lease = undefined;
      if (this.running > 0) this.calls?.abort(ACTOR_ENDED);
      // A call made from here on gets a signal aborted at once (bounded).
      this.calls = undefined;
      this.hooks.exited(this, snapshot.output ?? "stopped");
    }
  }

  private execute(action: LiveTaskAction): void {
    // Builtin actions' types are not all in xstate's union of executable actions.
    const type: string = action.type;
    if (type === "xstate.raise") {
      const { event, delay } = action.params as { event: LiveTaskEvent; delay?: number };
      if (delay === undefined) return;
      clearTimeout(this.timer);
      this.timer = undefined;
      // Due now (an instant provider's first poll): no timer's millisecond; an event the state left meanwhile is ignored.
      if (delay <= 0) return queueMicrotask(() => this.timerFired(event));
      this.timer = setTimeout(fire, delay, this, event);
      if (delay >= LONG_PAUSE_MS) this.park();
      return;
    }
    if (type === "xstate.cancel") {
      clearTimeout(this.timer);
      this.timer = undefined;
      return;
    }
    if (type !== "effect") return;
    const effect = action.params as LiveTaskEffect;
    switch (effect.do) {
      case "acquire": {
        // A slot free at once is the step's answer, taken after the step's other actions (as a call's would be).
        const slot = slotAtOnce(this, effect);
        if (slot === undefined) break;
        (this.queue ??= []).push(slot);
        return;
      }
      case "release":
        this.lease?.release();
        this.lease = undefined;
        return;
      case "sideline":
        this.deps.channels.sideline(effect.channel, effect.message);
        return;
      case "noteTransient":
        this.deps.channels.noteTransient(effect.channel, effect.message);
        return;
      case "warn":
        this.log.warn(effect.detail === undefined ? {} : { detail: effect.detail }, effect.message);
        return;
    }
    void this.hooks.run(this, () => runCall(this, effect)).then((event) => this.answered(event));
  }

  timerFired(event: LiveTaskEvent): void {
    this.timer = undefined;
    this.guarded(event);
  }

  private answered(event: LiveTaskEvent | undefined): void {
    // A slot granted just before the actor ended (handed back, stopped) goes straight back to the pool.
    if (this.exited && this.lease !== undefined) {
      this.lease.release();
      this.lease = undefined;
    }
    if (event !== undefined && !this.deps.shutdown.aborted) this.guarded(event);
  }

  /** Feeds an event that arrives on its own (a timer, a call's answer): a throw there has no caller to reach. */
  private guarded(event: LiveTaskEvent): void {
    try {
      this.send(event);
    } catch (error) {
      if (this.exited) return;
      this.letGo();
      this.hooks.crashed(this, error);
    }
  }

  /** The machine threw (a bug, not a fault it handles): the actor is dead, its timer and slot go. */
  private letGo(): void {
    this.exited = true;
    clearTimeout(this.timer);
    this.lease?.release();
    this.lease = undefined;
  }
}

/** One function for every task's timer: no closure per wait. */
const fire = (actor: LiveTaskActor, event: LiveTaskEvent): void => actor.timerFired(event);
