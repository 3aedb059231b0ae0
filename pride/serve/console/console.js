// pride console: a live view of a `pride serve --console` tree.
//
// Plain JavaScript, no library and no build step: the page reads the native
// API as any client does (GET /v1/branches, the /v1/events stream), signed in
// by the console's HttpOnly cookie. Everything shown comes from the server
// and is put in the page as text (textContent, never innerHTML), so a branch
// name or a model's answer cannot become markup. docs/console.md.
"use strict";

const SIGNALS = [
  "BranchStarted", "BranchStopped", "BranchRestarted", "SessionFailed",
  "RunStart", "RunEnd", "RunFailed", "ApprovalRequested", "ToolProgress",
];

const state = {
  tree: null,          // the last GET /v1/branches answer's session
  fetchedAt: 0,        // performance.now() when it arrived (elapsed times count from it)
};

// ------------------------------------------------------------------ helpers

// An element with attributes and children (strings become text nodes).
function h(tag, attributes, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else if (key === "class") element.className = value;
    else element.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

function setStatus(kind, text) {
  const status = document.getElementById("status");
  status.dataset.status = kind;
  status.textContent = text;
}

// A JSON request to the server; its error, if any, as an Error with the server's message.
async function api(path, options) {
  const response = await fetch(path, {credentials: "same-origin", ...(options || {})});
  if (response.status === 401) {
    window.location.assign("/");  // signed out (the server restarted): sign in again
    throw new Error("signed out");
  }
  const body = await response.json();
  if (!response.ok || body.ok === false) {
    const error = body.error || {};
    throw new Error(`${error.type || response.status}: ${error.message || response.statusText}`);
  }
  return body;
}

function money(cost) {
  if (cost === null || cost === undefined) return "cost unknown";
  return "$" + cost.toFixed(cost < 0.01 ? 6 : 4).replace(/0+$/, "").replace(/\.$/, ".00");
}

function seconds(value) {
  return value < 10 ? value.toFixed(1) + " s" : Math.round(value) + " s";
}

function duration(ms) {
  return ms < 1000 ? Math.round(ms) + " ms" : seconds(ms / 1000);
}

function shortId(id) {
  return id ? id.slice(0, 8) : "";
}

// ------------------------------------------------------------------ the tree

// Fetches of the tree, coalesced: one in flight at most, and one more after it
// if anything happened meanwhile.
let loading = null;
let again = false;

function refreshTree() {
  if (loading) {
    again = true;
    return loading;
  }
  loading = api("/v1/branches")
    .then((body) => {
      state.tree = body.session;
      state.fetchedAt = performance.now();
      renderTree();
    })
    .catch((error) => setStatus("error", error.message))
    .finally(() => {
      loading = null;
      if (again) {
        again = false;
        refreshTree();
      }
    });
  return loading;
}

function renderTree() {
  const root = document.getElementById("tree");
  root.replaceChildren(state.tree ? renderSession(state.tree) : "");
  tick();
}

function renderSession(session) {
  return h("ul", {class: "session", "data-session": session.name},
    h("li", {class: "session-name"}, session.name),
    session.branches.map(renderBranch),
    session.sessions.map((child) => h("li", {class: "child"}, renderSession(child))));
}

function renderBranch(branch) {
  const last = branch.last_turn;
  return h("li", {
      class: "branch", "data-branch": branch.name, "data-state": branch.state,
      "data-turn-id": branch.turn_id || "",
    },
    h("span", {class: "name"}, branch.name),
    h("span", {class: "state"}, branch.state),
    h("span", {class: "queued", title: "commands waiting in the mailbox"}, `${branch.queued} queued`),
    h("span", {class: "restarts"}, `${branch.restarts} restart${branch.restarts === 1 ? "" : "s"}`),
    branch.turn_id && h("span", {
        class: "turn", "data-turn-id": branch.turn_id,
        "data-elapsed": branch.turn_elapsed === null ? "" : branch.turn_elapsed,
      },
      `turn ${shortId(branch.turn_id)} `, h("span", {class: "elapsed"}, "")),
    last && h("span", {
        class: "last-turn", "data-turn-id": last.turn_id || "", "data-outcome": last.outcome,
        "data-cost": last.cost_usd === null ? "" : last.cost_usd,
      },
      `last turn ${shortId(last.turn_id)}: ${last.outcome} · ${money(last.cost_usd)} · `
      + `${last.input_tokens + last.output_tokens} tokens · ${duration(last.duration_ms)}`),
    h("span", {class: "usage", title: "this branch's usage since the server started"},
      branch.usage.input_tokens + branch.usage.output_tokens === 0 ? "no usage yet"
        : `total ${money(branch.usage.cost_usd)} · `
          + `${branch.usage.input_tokens + branch.usage.output_tokens} tokens`));
}

// Elapsed times of the turns in flight, counted on from the tree's answer.
function tick() {
  const since = (performance.now() - state.fetchedAt) / 1000;
  for (const turn of document.querySelectorAll("#tree .turn")) {
    const base = turn.dataset.elapsed === "" ? 0 : Number(turn.dataset.elapsed);
    turn.querySelector(".elapsed").textContent = seconds(base + since);
  }
}

// ------------------------------------------------------------------ events

function listen() {
  const events = new EventSource("/v1/events");
  events.addEventListener("open", () => {
    setStatus("live", "live");
    refreshTree();  // whatever happened while the stream was down
  });
  events.addEventListener("error", () => setStatus("reconnecting", "reconnecting"));
  for (const name of SIGNALS) {
    events.addEventListener(name, (event) => onSignal(name, JSON.parse(event.data)));
  }
  events.addEventListener("dropped", () => refreshTree());
}

function onSignal(name, signal) {
  refreshTree();
}

document.addEventListener("DOMContentLoaded", () => {
  listen();
  setInterval(tick, 250);
});
