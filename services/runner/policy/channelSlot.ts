import { setTimeout as sleep } from "node:timers/promises";
import type { FleetStore } from "../../shared/fleetStore.ts";
import type { VideoProvider } from "../providers/types.ts";
import type { FleetChannels } from "./fleetChannels.ts";

/** One provider entry as a channel: its adapter, its share of new tasks, how long it sits out after refusing us. */
export interface ChannelSettings {
  /** The provider entry's kind (`ark`, `openai`, `local`), for reports. */
  kind: string;
  provider: VideoProvider;
  weight: number;
  coolDownMs: number;
}

/** Where the pool keeps the fleet's shared state, and who this runner is in it. */
export interface FleetSettings {
  store: FleetStore;
  /** This runner's name in the shared records (unique in the fleet: host and pid). */
  runner: string;
  /** How long a runner's block of a channel's slots stays held after its last refresh (`runner.leaseMs`). */
  leaseMs: number;
}

/** A slot on one channel, held from submit until the task is final or handed over. */
export interface ChannelLease {
  channel: string;
  provider: VideoProvider;
  /** Waits for this submit's turn under the channel's `submitsPerSecond`, fleet-wide. */
  submitTurn(signal: AbortSignal): Promise<void>;
  release(): void;
}

/** What a slot needs of its pool. */
export interface SlotOwner {
  readonly fleet: FleetChannels;
  provider(channel: string): VideoProvider | undefined;
  slotReleased(slot: Slot): void;
}

/** A slot of this runner's block: a class rather than closures, since every live task holds one (thousands at a time). */
export class Slot implements ChannelLease {
  private released = false;

  constructor(
    readonly channel: string,
    readonly account: string,
    private readonly pool: SlotOwner,
  ) {}

  get provider(): VideoProvider {
    return this.pool.provider(this.channel) as VideoProvider;
  }

  async submitTurn(signal: AbortSignal): Promise<void> {
    const { submitsPerSecond } = this.provider.policy;
    if (submitsPerSecond <= 0) return;
    const at = await this.pool.fleet.submitAt(this.channel, submitsPerSecond);
    if (at > Date.now()) await sleep(at - Date.now(), undefined, { signal });
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.pool.slotReleased(this);
  }
}
