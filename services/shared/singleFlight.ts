/**
 * Concurrent calls for one key share the first call's work until it settles, per process: ten players asking
 * for a video's thumbnail before it is stored start one ffmpeg, not ten (each a process of its own and about
 * 200 MB); requests for a stored file not in memory share one read of it (video/videoFiles.ts).
 */
export class SingleFlight<T> {
  private readonly flights = new Map<string, Promise<T>>();

  run(key: string, work: () => Promise<T>): Promise<T> {
    const inFlight = this.flights.get(key);
    if (inFlight) return inFlight;
    const flight = work().finally(() => this.flights.delete(key));
    this.flights.set(key, flight);
    return flight;
  }
}
