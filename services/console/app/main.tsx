import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { api, forgetToken, SignedOut, storedToken, storeToken } from "./api.ts";
import { AccountPage, Accounts, Dashboard, TaskPage, Tasks } from "./views.tsx";

/** `#/dashboard`, `#/accounts`, `#/accounts/<name>`, `#/tasks?…`, `#/tasks/<id>`. */
function useRoute(): string {
  const [route, setRoute] = useState(location.hash.slice(1) || "/dashboard");
  useEffect(() => {
    const onChange = () => setRoute(location.hash.slice(1) || "/dashboard");
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

/** What the sign-in says of a refused token: the server's reason when it gives one beyond "invalid" (a customer API key). */
function refusalText(serverMessage: string): string {
  const reason = /^invalid admin token: (.+)$/.exec(serverMessage)?.[1];
  return reason === undefined ? "That admin token was refused." : `That admin token was refused: ${reason}.`;
}

function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | undefined>(undefined);
  const submit = async (event: Event) => {
    event.preventDefault();
    storeToken(token.trim());
    try {
      await api("/accounts");
      onSignedIn();
    } catch (failure) {
      forgetToken();
      setError(failure instanceof SignedOut ? refusalText(failure.message) : (failure as Error).message);
    }
  };
  return (
    <main class="signin">
      <h1>reelay console</h1>
      <form onSubmit={submit}>
        <label>
          Admin token
          <input type="password" autocomplete="off" value={token} onInput={(e) => setToken((e.target as HTMLInputElement).value)} placeholder="rla_…" />
        </label>
        <button type="submit">Sign in</button>
      </form>
      {error ? <p class="error" role="alert">{error}</p> : null}
      <p class="quiet">Create one with <code>reelay admin tokens create --name &lt;you&gt;</code>. It is kept in this tab only.</p>
    </main>
  );
}

function Page({ route }: { route: string }) {
  const [path = "", query = ""] = route.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "accounts" && parts[1]) return <AccountPage name={parts[1]} />;
  if (parts[0] === "accounts") return <Accounts />;
  if (parts[0] === "tasks" && parts[1]) return <TaskPage id={parts[1]} />;
  if (parts[0] === "tasks") return <Tasks key={query} filters={new URLSearchParams(query)} />;
  return <Dashboard />;
}

function App() {
  const [signedIn, setSignedIn] = useState(storedToken() !== null);
  const route = useRoute();
  useEffect(() => {
    // A refused token anywhere (revoked meanwhile) sends the console back to sign-in.
    const onRejection = (event: PromiseRejectionEvent) => event.reason instanceof SignedOut && setSignedIn(false);
    addEventListener("unhandledrejection", onRejection);
    return () => removeEventListener("unhandledrejection", onRejection);
  }, []);
  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  const section = route.split("/")[1] ?? "dashboard";
  return (
    <>
      <nav>
        <strong>reelay</strong>
        {(["dashboard", "accounts", "tasks"] as const).map((name) => (
          <a key={name} href={`#/${name}`} class={section.startsWith(name) ? "current" : ""}>
            {name[0]?.toUpperCase()}{name.slice(1)}
          </a>
        ))}
        <button
          class="quiet"
          onClick={() => {
            forgetToken();
            setSignedIn(false);
          }}
        >
          Sign out
        </button>
      </nav>
      <main>
        <Page route={route} />
      </main>
    </>
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
