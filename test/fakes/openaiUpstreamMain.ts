/**
 * The fake OpenAI-compatible upstream as its own process (for benchmarks, where its CPU must be measured
 * apart from the gateway's). Usage: `node --import tsx test/fakes/openaiUpstreamMain.ts '<options JSON>'` (FakeOptions).
 * The key it accepts comes from FAKE_UPSTREAM_KEY. Prints `PORT <port>` once listening; stops on SIGTERM.
 */
import { startFakeUpstream, type FakeOptions } from "./openaiUpstream.ts";

const options = JSON.parse(process.argv[2] ?? "{}") as FakeOptions;
const apiKey = process.env.FAKE_UPSTREAM_KEY;
const fake = await startFakeUpstream({ ...options, record: false, ...(apiKey ? { apiKey } : {}) });
process.stdout.write(`PORT ${new URL(fake.baseUrl).port}\n`);
const stop = () => void fake.stop().then(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
