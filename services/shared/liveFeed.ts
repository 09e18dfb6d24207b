import { setTimeout as sleep } from "node:timers/promises";
import { jetstream, type Consumer, type ConsumerMessages, type ConsumerNotification, type JetStreamClient, type JsMsg } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Logger } from "./log.ts";

/**
 * How every live feed (an edge's task-log hub, reactors, runners, webhook dispatchers) learns that its
 * consumer is gone: a server that loses a consumer (its node killed, the consumer deleted, the server
 * restarted without it) simply stops sending, and the client's defaults (pulls of 30 s, an idle heartbeat of
 * 15 s, two missed before it reacts) noticed that only after about 30 s. Every feed here pulls with these
 * options instead: the server heartbeats an idle pull every 0.5 s, and nats.js reports `heartbeats_missed`
 * after two silent intervals (1–1.5 s). See "Live feeds" in docs/decisions.md.
 */
export const FEED_HEARTBEAT_MS = 500;
/**
 * One pull request's life. The server refuses an idle heartbeat longer than half of it, and a pull that ends
 * is renewed by the client at once, so this bounds nothing a reader sees.
 */
export const FEED_PULL_EXPIRES_MS = 2_000;
/** The options every feed's `consume()` and `fetch()` pass (plus its own batch size). */
export const LIVE_PULL = { idle_heartbeat: FEED_HEARTBEAT_MS, expires: FEED_PULL_EXPIRES_MS } as const;
/** The shortest pull nats.js makes (it refuses `expires` under 1 s). */
const MIN_PULL_EXPIRES_MS = 1_000;

/**
 * The pull options of a reader that must keep a pinned-client priority group's pin: the server resets the
 * pin's timeout only when a new pull request comes (nats-server, consumer.go: setPinnedTimer), not for a pull
 * still waiting, and an idle consume() asks again only when its pull ends. So each pull lasts at most half
 * the pin's timeout; with 2 s pulls and a 2 s timeout the pin of an idle reader lapsed, and another process
 * could be pinned while this one still held unacknowledged messages.
 */
export function pinKeepingPull(pinTimeoutMs: number): { idle_heartbeat: number; expires: number } {
  return { ...LIVE_PULL, expires: Math.min(LIVE_PULL.expires, Math.max(MIN_PULL_EXPIRES_MS, Math.floor(pinTimeoutMs / 2))) };
}
/** A feed that gave no message and no heartbeat for longer than this is behind, whatever else it says. */
export const FEED_SILENCE_MS = 2_000;
/** A feed whose last message said more events than this still wait for it on the server is catching up: behind. */
export const FEED_LAG_BOUND = 100;
/**
 * How long a feed's JetStream API calls (opening a consumer, asking for its info after a loss) wait for an
 * answer. While a stream or consumer has no leader (an election after a node loss: a few seconds) nobody
 * answers, and the client's 5 s default made a feed come back up to 5 s after its new leader did.
 */
export const FEED_API_TIMEOUT_MS = 1_000;
/**
 * The longest pause between two attempts at reopening a lost feed: it must be back soon after its server is.
 * An attempt made while nobody can answer (no leader yet) waits out FEED_API_TIMEOUT_MS first, so attempts
 * are at most 1.25 s apart and a feed is back within about that of its new leader.
 */
const MAX_REOPEN_PAUSE_MS = 250;

/** A JetStream client for opening live feeds: API calls time out after FEED_API_TIMEOUT_MS, so they are tried again soon. */
export function feedClient(nc: NatsConnection): JetStreamClient {
  return jetstream(nc, { timeout: FEED_API_TIMEOUT_MS });
}

/** The notifications of `ConsumerMessages.status()` that mean nothing more will come on this pull. */
const LOSSES = new Set<ConsumerNotification["type"]>(["heartbeats_missed", "consumer_deleted", "consumer_not_found", "stream_not_found", "no_responders"]);

/**
 * What a feed last heard from its consumer, and so whether what it fed is current ("behind": see
 * `behindReason`). Plain fields and a clock read: cheap enough for every /healthz a balancer sends.
 */
export class FeedLiveness {
  private open = false;
  private lastSignAt = 0;
  /** Events still to take after the last one: held by the server for the feed, or received and not taken yet. */
  private waiting = Number.POSITIVE_INFINITY;
  private wasBehind = true;

  constructor(
    /** Told whenever a message, heartbeat, open or loss makes the feed behind or current. */
    private readonly onBehind?: (behind: boolean) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** A consumer was (re)opened with `waiting` events for it (its info's `num_pending`; unknown: behind until a sign). */
  opened(waiting = Number.POSITIVE_INFINITY): void {
    this.open = true;
    this.waiting = waiting;
    this.lastSignAt = this.now();
    this.changed();
  }

  /** A message is taken; `waiting`: how many more there are (the server's `info.pending` and the client's buffer). */
  message(waiting: number): void {
    this.open = true;
    this.waiting = waiting;
    this.lastSignAt = this.now();
    this.changed();
  }

  /** The server heartbeats only a feed it has nothing more for: what is left is what the client holds (`buffered`). */
  heartbeat(buffered: number): void {
    this.open = true;
    this.waiting = buffered;
    this.lastSignAt = this.now();
    this.changed();
  }

  /** Messages arrived that the reader has not taken yet: the consumer is alive (a slow reader is not a lost feed). */
  arrived(): void {
    this.lastSignAt = this.now();
  }

  lost(): void {
    this.open = false;
    this.changed();
  }

  /** How long the feed has had neither a message nor a heartbeat. */
  silentMs(): number {
    return this.now() - this.lastSignAt;
  }

  /** Why what the feed fed may be old, or undefined when it is current. */
  behindReason(): string | undefined {
    if (!this.open) return "is not open";
    const silentMs = this.silentMs();
    if (silentMs > FEED_SILENCE_MS) return `has been silent for ${(silentMs / 1000).toFixed(1)} s`;
    if (this.waiting === Number.POSITIVE_INFINITY) return "was reopened and has not caught up yet";
    if (this.waiting > FEED_LAG_BOUND) return `is catching up (${this.waiting} events behind)`;
    return undefined;
  }

  get behind(): boolean {
    return this.behindReason() !== undefined;
  }

  private changed(): void {
    const behind = this.behind;
    if (behind === this.wasBehind) return;
    this.wasBehind = behind;
    this.onBehind?.(behind);
  }
}

/**
 * Follows a pull's status notifications: heartbeats are signs of life; a loss (two missed heartbeats, the
 * consumer deleted or not found) is reported to `onLost` once per silence. Ends with the pull.
 */
export function watchPull(messages: ConsumerMessages, liveness: FeedLiveness, onLost: (why: string) => void): void {
  void (async () => {
    let reported = false;
    for await (const status of messages.status()) {
      if (status.type === "heartbeat") {
        liveness.heartbeat(messages.getPending());
        reported = false;
      } else if (LOSSES.has(status.type) && !reported) {
        reported = true;
        liveness.lost();
        onLost(status.type);
      }
    }
  })();
}

/**
 * A durable consumer's pull (`consume()` with LIVE_PULL): after a loss nats.js itself asks for the consumer's
 * info (which finds its new leader after a failover) and pulls again, keeping a pinned client's pin; a new
 * pull of ours would have no pin and wait out the group's pin timeout (a lease). This only tells the log.
 */
export function watchDurablePull(messages: ConsumerMessages, what: string, log: Logger): void {
  const liveness = new FeedLiveness();
  liveness.opened();
  watchPull(messages, liveness, (why) => log.warn({ feed: what, why }, "a feed lost its consumer; pulling again once it answers"));
}

export interface OrderedFeedOptions {
  /** For logs. */
  what: string;
  log: Logger;
  /** Stream sequence of the last message already taken: the feed starts after it. */
  from: number;
  /** A new ordered consumer whose first message is the one after `position` (a stream sequence). */
  open: (position: number) => Promise<Consumer>;
  /** Each message in stream order, once; the feed waits for it before taking the next. */
  take: (msg: JsMsg) => void | Promise<void>;
  /** Told whenever the feed becomes behind or current (see `FeedLiveness`). */
  onBehind?: (behind: boolean) => void;
  /** `consume()` batch size (the client's default, 100, otherwise). */
  maxMessages?: number;
}

/**
 * A feed on an ordered consumer that does not wait for the client to notice a lost consumer: on a loss it
 * stops the pull and opens a new consumer itself, starting after the last message taken (which it tracks),
 * retrying until the server answers. Messages the client received before the loss are
 * still taken first, so nothing is skipped or taken twice. (nats.js resets an ordered consumer on its own only
 * when the server says it is not found; a consumer on a dead node is not even that, and the client kept
 * asking for it.)
 */
export class OrderedFeed {
  /** Stream sequence of the last message taken. */
  position: number;
  readonly liveness: FeedLiveness;
  private stopped = false;
  private current: { messages: ConsumerMessages; consumer: Consumer; watchdog: NodeJS.Timeout } | undefined;

  constructor(private readonly options: OrderedFeedOptions) {
    this.position = options.from;
    this.liveness = new FeedLiveness(options.onBehind);
  }

  /** Resolves once the first consumer is open (rejects if it cannot be opened); the feed then runs until `stop`. */
  async start(): Promise<void> {
    const first = await this.openPull();
    void this.run(first);
  }

  stop(): void {
    this.stopped = true;
    this.lose();
  }

  /**
   * Drops the current consumer and opens a new one after the last message taken (after a reconnect, say).
   * `deliberate`: nothing was lost (the reader changed what `open` asks for), so what the feed fed stays as
   * current as it was while the new consumer opens (if that fails, the feed is behind as after a loss).
   */
  reopen(why: string, deliberate = false): void {
    if (!this.current) return;
    this.options.log.info({ feed: this.options.what, position: this.position, why }, "reopening a feed");
    this.lose(deliberate);
  }

  /** Why what this feed fed may be old (undefined: it is current). */
  behindReason(): string | undefined {
    return this.liveness.behindReason();
  }

  private async openPull(): Promise<ConsumerMessages> {
    const consumer = await this.options.open(this.position);
    // The ordered consumer was made by `open`: its cached info says what waited for it then.
    const { num_pending: waiting } = await consumer.info(true);
    const messages = await consumer.consume({ ...LIVE_PULL, ...(this.options.maxMessages ? { max_messages: this.options.maxMessages } : {}) });
    const lost = (why: string) => {
      if (this.current?.messages !== messages) return;
      this.options.log.warn({ feed: this.options.what, position: this.position, why }, "a feed lost its consumer; opening a new one");
      this.lose();
    };
    // nats.js stops counting missed heartbeats at a disconnect and starts again only once it has found the
    // consumer after the reconnect, which it never does for one on a dead node: silence alone counts too.
    let received = 0;
    const watchdog = setInterval(() => {
      if (messages.getReceived() !== received) {
        received = messages.getReceived();
        this.liveness.arrived();
      } else if (this.liveness.silentMs() > FEED_SILENCE_MS) lost("silent");
    }, FEED_HEARTBEAT_MS);
    this.current = { messages, consumer, watchdog };
    this.liveness.opened(waiting);
    watchPull(messages, this.liveness, lost);
    return messages;
  }

  private lose(deliberate = false): void {
    const current = this.current;
    this.current = undefined;
    if (!deliberate) this.liveness.lost();
    if (!current) return;
    clearInterval(current.watchdog);
    current.messages.stop();
    // Not left to its inactivity timeout: a consumer on a node that comes back would keep being served meanwhile.
    current.consumer.delete().catch(() => undefined);
  }

  private async run(first: ConsumerMessages): Promise<void> {
    let messages: ConsumerMessages | undefined = first;
    for (let pause = 100; !this.stopped; ) {
      if (messages) {
        try {
          for await (const msg of messages) {
            this.liveness.message(msg.info.pending + messages.getPending());
            await this.options.take(msg);
            this.position = msg.seq;
          }
        } catch (error) {
          if (!this.stopped) this.options.log.warn({ err: error, feed: this.options.what, position: this.position }, "a feed failed; opening a new consumer");
        }
        if (this.current?.messages === messages) this.lose();
        messages = undefined;
        pause = 100;
      }
      if (this.stopped) return;
      try {
        messages = await this.openPull();
        // Stopped while it opened: `stop()` found nothing to let go, and the new consumer and its watchdog ran on
        // until the pull it was never read from went quiet (about a second in a probe).
        if (this.stopped) this.lose();
      } catch (error) {
        // A deliberate reopen kept the feed current so far: no longer.
        this.liveness.lost();
        this.options.log.warn({ err: error, feed: this.options.what, position: this.position }, "could not reopen a feed; trying again");
        await sleep(pause);
        pause = Math.min(pause * 2, MAX_REOPEN_PAUSE_MS);
      }
    }
  }
}
