import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import type { z } from "zod";
import type { AccountSummary, ApiKeySummary, CreatedApiKey, LedgerPage, StatsAnswer, TaskDetail, TaskPage as TaskPageAnswer } from "../../../contracts/adminApi.ts";
import type { ChannelReport } from "../../../contracts/runnerControl.ts";
import { api, followEvents } from "./api.ts";

type Stats = z.infer<typeof StatsAnswer>;
type Account = z.infer<typeof AccountSummary>;
type Task = z.infer<typeof TaskPageAnswer>["tasks"][number];

/**
 * Loads `load()` on mount and whenever `deps` change; `reload` runs it again. A reload asked for while a load
 * is on its way runs once that one is done, whose answer is still shown: under a steady stream of events a
 * live view reloads every 300 ms, and dropping each answer for the next one showed nothing at all while
 * loads took longer than that (a list over 100,000 tasks). A change of `deps` drops older answers.
 */
function useLoaded<T>(load: () => Promise<T>, deps: unknown[]): { data: T | undefined; error: string | undefined; reload: () => void } {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [round, setRound] = useState(0);
  const generation = useRef(0);
  const loading = useRef(false);
  const again = useRef(false);
  const mounted = useRef(true);
  useEffect(() => () => void (mounted.current = false), []);
  useEffect(() => void (generation.current += 1), deps);
  useEffect(() => {
    if (loading.current) {
      again.current = true;
      return;
    }
    const mine = generation.current;
    const current = () => mounted.current && generation.current === mine;
    loading.current = true;
    load()
      .then(
        (value) => current() && (setData(value), setError(undefined)),
        (failure: unknown) => current() && setError((failure as Error).message),
      )
      .finally(() => {
        loading.current = false;
        if (again.current && mounted.current) {
          again.current = false;
          setRound((n) => n + 1);
        }
      });
  }, [...deps, round]);
  return { data, error, reload: useCallback(() => setRound((n) => n + 1), []) };
}

/** After the last event of a burst, the read models have had this long to catch up: one more reload then. */
const SETTLED_RELOAD_MS = 1500;

/**
 * Reloads on every task or ledger event, at most every 300 ms, and once more when the events have been quiet
 * for a while: views load read models (the task index, balances) that are written after the event itself, so
 * the reload an event triggers can still miss it. Without the last reload, a task whose events all came
 * within one window stayed out of the list until the next event.
 */
function useLive(reload: () => void): void {
  useEffect(() => {
    let soon: ReturnType<typeof setTimeout> | undefined;
    let settled: ReturnType<typeof setTimeout> | undefined;
    const stop = followEvents(() => {
      soon ??= setTimeout(() => {
        soon = undefined;
        reload();
      }, 300);
      clearTimeout(settled);
      settled = setTimeout(reload, SETTLED_RELOAD_MS);
    });
    return () => {
      stop();
      clearTimeout(soon);
      clearTimeout(settled);
    };
  }, [reload]);
}

const Failure = ({ error }: { error: string | undefined }) => (error ? <p class="error" role="alert">{error}</p> : null);

/** Bars for the last 24 hours (oldest left), with the hour under the first and the last. */
function BarChart({ title, values, labels, unit }: { title: string; values: number[]; labels: string[]; unit: string }) {
  const max = Math.max(1, ...values);
  const width = 24 * 14;
  return (
    <figure class="chart">
      <figcaption>{title}</figcaption>
      <svg viewBox={`0 0 ${width} 110`} role="img" aria-label={title}>
        {values.map((value, i) => {
          const height = Math.round((value / max) * 90);
          return (
            <rect key={i} x={i * 14 + 2} y={95 - height} width={10} height={height} class="bar">
              <title>{`${labels[i] ?? ""}: ${value} ${unit}`}</title>
            </rect>
          );
        })}
        <text x={2} y={108}>{labels[0]?.slice(11, 16)}</text>
        <text x={width - 34} y={108}>{labels.at(-1)?.slice(11, 16)}</text>
      </svg>
    </figure>
  );
}

export function Dashboard() {
  const stats = useLoaded(() => api<Stats>("/stats"), []);
  const channels = useLoaded(() => api<{ channels: ChannelReport[] }>("/channels"), []);
  useLive(stats.reload);
  const hours = stats.data?.hours ?? [];
  const rows = channels.data?.channels ?? [];
  const byAccount = (counts: Record<string, number>) =>
    Object.entries(counts)
      .map(([account, count]) => `${account} ${count}`)
      .join(", ");
  return (
    <section>
      <h1>Dashboard</h1>
      <Failure error={stats.error} />
      <div class="tiles" data-testid="tasks-by-state">
        {(["pending", "running", "success", "failed"] as const).map((status) => (
          <div class={`tile ${status}`} key={status}>
            <span class="count" data-testid={`count-${status}`}>{stats.data?.tasks[status] ?? "…"}</span>
            <span>{status}</span>
          </div>
        ))}
      </div>
      <div class="charts">
        <BarChart title="Tasks created per hour (24 h)" values={hours.map((hour) => hour.created)} labels={hours.map((hour) => hour.hour)} unit="tasks" />
        <BarChart title="Spend per hour, yuan (24 h)" values={hours.map((hour) => Number(hour.charged))} labels={hours.map((hour) => hour.hour)} unit="yuan" />
      </div>
      <h2>Channels (whole fleet)</h2>
      {rows.length === 0 ? (
        <p class="quiet">No runner has reported a channel yet.</p>
      ) : (
        <table data-testid="channels">
          <thead><tr><th>Channel</th><th>State</th><th>In flight</th><th>Waiting</th><th>Submits/s</th><th>Last error</th></tr></thead>
          <tbody>
            {rows.map((channel) => (
              <tr key={channel.channel}>
                <td>{channel.channel}</td>
                <td>{channel.state}{channel.backAt ? ` until ${channel.backAt}` : ""}</td>
                <td title={byAccount(channel.inFlightByAccount)}>{channel.inFlight}/{channel.maxInFlight}</td>
                <td>{channel.waiting}{channel.waiting > 0 ? ` (${byAccount(channel.waitingByAccount)})` : ""}</td>
                <td>{channel.submitRate}{channel.submitsPerSecond > 0 ? ` / ${channel.submitsPerSecond}` : ""}</td>
                <td>{channel.recentErrors.at(-1)?.message ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function Accounts() {
  const [search, setSearch] = useState("");
  const [name, setName] = useState("");
  const [error, setError] = useState<string | undefined>(undefined);
  const accounts = useLoaded(() => api<{ accounts: Account[] }>("/accounts"), []);
  useLive(accounts.reload);
  const create = async (event: Event) => {
    event.preventDefault();
    try {
      await api("/accounts", { method: "POST", body: { name } });
      location.hash = `#/accounts/${encodeURIComponent(name)}`;
    } catch (failure) {
      setError((failure as Error).message);
    }
  };
  const shown = (accounts.data?.accounts ?? []).filter((account) => account.name.includes(search.trim()));
  return (
    <section>
      <h1>Accounts</h1>
      <form class="row" onSubmit={create}>
        <input aria-label="new account name" placeholder="new account name" value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} />
        <button type="submit">Create account</button>
      </form>
      <Failure error={error ?? accounts.error} />
      <input type="search" aria-label="search accounts" placeholder="search" value={search} onInput={(e) => setSearch((e.target as HTMLInputElement).value)} />
      <table>
        <thead><tr><th>Account</th><th>Balance</th><th>Reserved</th><th>Available</th></tr></thead>
        <tbody>
          {shown.map((account) => (
            <tr key={account.name}>
              <td><a href={`#/accounts/${encodeURIComponent(account.name)}`}>{account.name}</a></td>
              <td>{account.balance}</td>
              <td>{account.reserved}</td>
              <td>{account.available}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

export function AccountPage({ name }: { name: string }) {
  const path = `/accounts/${encodeURIComponent(name)}`;
  const account = useLoaded(() => api<Account>(path), [name]);
  const keys = useLoaded(() => api<{ keys: Array<z.infer<typeof ApiKeySummary>> }>(`${path}/keys`), [name]);
  const ledger = useLoaded(() => api<z.infer<typeof LedgerPage>>(`${path}/ledger?limit=20`), [name]);
  const [amount, setAmount] = useState("");
  const [newKey, setNewKey] = useState<string | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const reloadAll = useCallback(() => {
    account.reload();
    ledger.reload();
  }, [account.reload, ledger.reload]);
  useLive(reloadAll);
  const credit = async (event: Event) => {
    event.preventDefault();
    if (!confirm(`Credit ${amount} yuan to ${name}?`)) return;
    try {
      await api(`${path}/credit`, { method: "POST", body: { amount } });
      setAmount("");
      setError(undefined);
      reloadAll();
    } catch (failure) {
      setError((failure as Error).message);
    }
  };
  const createKey = async () => {
    try {
      setNewKey((await api<z.infer<typeof CreatedApiKey>>(`${path}/keys`, { method: "POST" })).key);
      keys.reload();
    } catch (failure) {
      setError((failure as Error).message);
    }
  };
  const revoke = async (id: string) => {
    if (!confirm(`Revoke key ${id}?`)) return;
    await api(`/keys/${id}`, { method: "DELETE" }).catch((failure: unknown) => setError((failure as Error).message));
    keys.reload();
  };
  return (
    <section>
      <h1>Account {name}</h1>
      <Failure error={error ?? account.error} />
      <div class="tiles">
        <div class="tile"><span class="count" data-testid="balance">{account.data?.balance ?? "…"}</span><span>balance, yuan</span></div>
        <div class="tile"><span class="count">{account.data?.reserved ?? "…"}</span><span>reserved</span></div>
        <div class="tile"><span class="count">{account.data?.available ?? "…"}</span><span>available</span></div>
      </div>
      <form class="row" onSubmit={credit}>
        <input aria-label="amount in yuan" placeholder="yuan, e.g. 50.00" value={amount} onInput={(e) => setAmount((e.target as HTMLInputElement).value)} />
        <button type="submit">Credit</button>
      </form>
      <h2>API keys</h2>
      <button onClick={() => void createKey()}>Create key</button>
      {newKey ? (
        <p class="secret">
          New key (shown only now): <code data-testid="new-key">{newKey}</code>
        </p>
      ) : null}
      <table>
        <thead><tr><th>Key id</th><th>Created</th><th /></tr></thead>
        <tbody>
          {(keys.data?.keys ?? []).map((key) => (
            <tr key={key.id}>
              <td>{key.id}</td>
              <td>{key.created_at}</td>
              <td><button class="quiet" onClick={() => void revoke(key.id)}>Revoke</button></td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Ledger</h2>
      <table>
        <thead><tr><th>When</th><th>Entry</th><th>Balance</th></tr></thead>
        <tbody>
          {(ledger.data?.entries ?? []).map((entry) => (
            <tr key={entry.sequence}><td>{entry.at}</td><td>{entry.description}</td><td>{entry.balance}</td></tr>
          ))}
        </tbody>
      </table>
      <p><a href={`#/tasks?account=${encodeURIComponent(name)}`}>This account's tasks</a></p>
    </section>
  );
}

export function Tasks({ filters }: { filters: URLSearchParams }) {
  const [account, setAccount] = useState(filters.get("account") ?? "");
  const [status, setStatus] = useState(filters.get("status") ?? "");
  const [model, setModel] = useState(filters.get("model") ?? "");
  const query = new URLSearchParams({ limit: "50", ...(account ? { account } : {}), ...(status ? { status } : {}), ...(model ? { model } : {}) }).toString();
  const tasks = useLoaded(() => api<z.infer<typeof TaskPageAnswer>>(`/tasks?${query}`), [query]);
  useLive(tasks.reload);
  return (
    <section>
      <h1>Tasks</h1>
      <div class="row">
        <input aria-label="filter by account" placeholder="account" value={account} onInput={(e) => setAccount((e.target as HTMLInputElement).value)} />
        <select aria-label="filter by status" value={status} onChange={(e) => setStatus((e.target as HTMLSelectElement).value)}>
          <option value="">any status</option>
          {["pending", "running", "success", "failed"].map((s) => <option key={s} value={s}>{s}</option>)}
        </select>
        <input aria-label="filter by model" placeholder="model" value={model} onInput={(e) => setModel((e.target as HTMLInputElement).value)} />
      </div>
      <Failure error={tasks.error} />
      <table>
        <thead><tr><th>Task</th><th>Account</th><th>Model</th><th>Status</th><th>Cost</th><th>Updated</th></tr></thead>
        <tbody>
          {(tasks.data?.tasks ?? []).map((task: Task) => (
            <tr key={task.task_id} data-testid={`task-${task.task_id}`}>
              <td><a href={`#/tasks/${task.task_id}`}>{task.task_id}</a></td>
              <td>{task.account}</td>
              <td>{task.model}</td>
              <td class={`status ${task.status}`} data-testid={`status-${task.task_id}`}>{task.status}</td>
              <td>{task.cost ?? ""}</td>
              <td>{task.updated_at}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

export function TaskPage({ id }: { id: string }) {
  const task = useLoaded(() => api<z.infer<typeof TaskDetail>>(`/tasks/${encodeURIComponent(id)}`), [id]);
  useLive(task.reload);
  const data = task.data;
  return (
    <section>
      <h1>Task {id}</h1>
      <Failure error={task.error} />
      {data ? (
        <>
          <p>
            <span class={`status ${data.status}`}>{data.status}</span> · {data.model} · account <a href={`#/accounts/${encodeURIComponent(data.account)}`}>{data.account}</a>
            {data.cost ? ` · ${data.cost} yuan` : ""} {data.reason ? ` · ${data.reason}` : ""}
          </p>
          {data.video_url ? <video src={data.video_url} controls width={480} data-testid="video" /> : null}
          <h2>Timeline</h2>
          <table>
            <thead><tr><th>When</th><th>Event</th><th>Detail</th><th>Money</th></tr></thead>
            <tbody>
              {data.timeline.map((entry, i) => (
                <tr key={i}>
                  <td>{entry.at}</td>
                  <td>{entry.type}</td>
                  <td class="detail">{entry.description}</td>
                  <td>{entry.ledger.map((effect) => `${effect.type} ${effect.amount}`).join(", ")}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      ) : null}
    </section>
  );
}
