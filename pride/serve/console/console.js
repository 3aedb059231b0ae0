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
  "RunStart", "RunEnd", "RunFailed", "RunSuspended", "ApprovalRequested", "ToolProgress",
  "NodeStarted", "NodeCompleted", "NodeFailed", "NodeSkipped", "NodeCancelled",
];
const PAGE = 100;  // messages per page of a conversation

const state = {
  tree: null,          // the last GET /v1/branches answer's session
  fetchedAt: 0,        // performance.now() when it arrived (elapsed times count from it)
  selected: null,      // the branch whose conversation is open
  conversation: null,  // {branch, start, end, total}: the messages shown are [start, end)
  waiting: new Set(),  // the turn ids the approvals list shows
  deciding: new Set(), // "turn call" keys whose decision is on its way
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

// Make `target` look like `source` while keeping every element whose place and
// kind (tag, and data-key where given) are unchanged: a re-draw on each event
// then never swaps an element out from under a click in progress. An element
// kept keeps its listeners, so an element with one carries (or sits inside one
// that carries) a data-key naming what the listener acts on.
function morph(target, source) {
  if (target.nodeType !== Node.ELEMENT_NODE) {
    if (target.data !== source.data) target.data = source.data;
    return;
  }
  for (const {name} of [...target.attributes]) {
    if (!source.hasAttribute(name)) target.removeAttribute(name);
  }
  for (const {name, value} of [...source.attributes]) {
    if (name === "style") {
      // CSSOM, not the attribute: the page's policy refuses inline style attributes.
      if (target.style.cssText !== source.style.cssText) target.style.cssText = source.style.cssText;
    } else if (target.getAttribute(name) !== value) {
      target.setAttribute(name, value);
    }
  }
  const before = [...target.childNodes];
  const after = [...source.childNodes];
  after.forEach((node, index) => {
    const old = before[index];
    if (old === undefined) target.append(node);
    else if (sameKind(old, node)) morph(old, node);
    else target.replaceChild(node, old);
  });
  for (const old of before.slice(after.length)) old.remove();
}

function sameKind(a, b) {
  if (a.nodeType !== b.nodeType || a.nodeName !== b.nodeName) return false;
  return a.nodeType !== Node.ELEMENT_NODE || (a.dataset.key || "") === (b.dataset.key || "");
}

// Re-draw `container` with `children` (see morph).
function update(container, ...children) {
  const fresh = container.cloneNode(false);
  fresh.append(...children.flat().filter((child) => child !== null && child !== undefined && child !== ""));
  morph(container, fresh);
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
  if (ms < 10) return ms.toFixed(1) + " ms";
  return ms < 1000 ? Math.round(ms) + " ms" : seconds(ms / 1000);
}

function shortId(id) {
  return id ? id.slice(0, 8) : "";
}

// ------------------------------------------------------------------ the tree

// `load` run so that one is in flight at most, and one more after it if it was
// asked for meanwhile (what happened while it ran is then picked up too).
function coalesced(load) {
  let running = null;
  let again = false;
  const run = () => {
    if (running) {
      again = true;
      return running;
    }
    running = load()
      .catch((error) => setStatus("error", error.message))
      .finally(() => {
        running = null;
        if (again) {
          again = false;
          run();
        }
      });
    return running;
  };
  return run;
}

const refreshTree = coalesced(async () => {
  const body = await api("/v1/branches");
  state.tree = body.session;
  state.fetchedAt = performance.now();
  renderTree();
});

function renderTree() {
  update(document.getElementById("tree"), state.tree ? renderSession(state.tree) : null);
  renderUsage();
  tick();
  // A turn the tree says is suspended but the approvals list lacks: fetch them
  // again (an event may have come before the turn was waiting).
  if (suspendedTurns(state.tree).some((id) => !state.waiting.has(id))) refreshApprovals();
}

function suspendedTurns(session) {
  if (!session) return [];
  const found = session.branches
    .filter((b) => b.last_turn && b.last_turn.outcome === "suspended" && b.state !== "busy")
    .map((b) => b.last_turn.turn_id);
  return found.concat(...session.sessions.map(suspendedTurns));
}

function findBranch(session, name) {
  if (!session) return null;
  for (const branch of session.branches) if (branch.name === name) return branch;
  for (const child of session.sessions) {
    const found = findBranch(child, name);
    if (found) return found;
  }
  return null;
}

function renderSession(session) {
  return h("ul", {class: "session", "data-session": session.name, "data-key": session.name},
    h("li", {class: "session-name"}, session.name),
    session.branches.map(renderBranch),
    session.sessions.map((child) => h("li", {class: "child"}, renderSession(child))));
}

function renderBranch(branch) {
  const last = branch.last_turn;
  return h("li", {
      class: "branch", "data-branch": branch.name, "data-key": branch.name, "data-state": branch.state,
      "data-turn-id": branch.turn_id || "",
      "aria-selected": branch.name === state.selected ? "true" : "false",
      onclick: () => openConversation(branch.name),
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

// ------------------------------------------------------------------ a conversation

function messagesPath(branch, offset, limit) {
  return `/v1/branches/${encodeURIComponent(branch)}/messages?offset=${offset}&limit=${limit}`;
}

// Open `branch`'s conversation at its latest page; earlier pages load on demand.
async function openConversation(branch) {
  state.selected = branch;
  for (const row of document.querySelectorAll("#tree li.branch")) {
    row.setAttribute("aria-selected", row.dataset.branch === branch ? "true" : "false");
  }
  const view = document.getElementById("conversation");
  view.dataset.branch = branch;
  delete view.dataset.loaded;
  view.replaceChildren(h("p", {class: "empty"}, "loading…"));
  try {
    const head = await api(messagesPath(branch, 0, 0));
    const start = Math.max(0, head.total - PAGE);
    const page = await api(messagesPath(branch, start, PAGE));
    if (state.selected !== branch) return;  // another branch was picked meanwhile
    state.conversation = {branch, start, end: start + page.messages.length, total: page.total};
    view.replaceChildren(
      h("div", {class: "conversation-head"},
        h("h2", {}, branch), h("span", {class: "usage"}),
        h("button", {class: "earlier", onclick: loadEarlier}, "")),
      h("ol", {class: "messages"}, page.messages.map(renderMessage)));
    view.dataset.loaded = "";
    renderPaging();
    renderUsage();
    view.querySelector(".messages").lastElementChild?.scrollIntoView({block: "end"});
  } catch (error) {
    view.replaceChildren(h("p", {class: "error"}, error.message));
  }
}

async function loadEarlier() {
  const shown = state.conversation;
  if (!shown || shown.start === 0) return;
  const start = Math.max(0, shown.start - PAGE);
  const page = await api(messagesPath(shown.branch, start, shown.start - start));
  if (state.conversation !== shown) return;
  const list = document.querySelector("#conversation .messages");
  list.prepend(...page.messages.map(renderMessage));
  shown.start = start;
  renderPaging();
}

// New messages of the open conversation, after one of its turns ended.
const loadNewer = coalesced(async () => {
  const shown = state.conversation;
  if (!shown) return;
  const page = await api(messagesPath(shown.branch, shown.end, 500));
  if (state.conversation !== shown) return;
  const list = document.querySelector("#conversation .messages");
  list.append(...page.messages.map(renderMessage));
  shown.end += page.messages.length;
  shown.total = page.total;
  renderPaging();
  list.lastElementChild?.scrollIntoView({block: "end"});
  if (shown.end < page.total) loadNewer();
});

function renderPaging() {
  const shown = state.conversation;
  const view = document.getElementById("conversation");
  view.dataset.total = shown.total;
  const button = view.querySelector("button.earlier");
  button.hidden = shown.start === 0;
  button.textContent = `show ${Math.min(PAGE, shown.start)} earlier (${shown.start} not shown)`;
}

function renderUsage() {
  const usage = document.querySelector("#conversation .usage");
  const branch = state.selected && findBranch(state.tree, state.selected);
  if (!usage || !branch) return;
  const tokens = branch.usage.input_tokens + branch.usage.output_tokens;
  usage.dataset.cost = branch.usage.cost_usd === null ? "" : branch.usage.cost_usd;
  usage.textContent = `${branch.usage.input_tokens} in · ${branch.usage.output_tokens} out · `
    + `${tokens} tokens · ${money(branch.usage.cost_usd)}`;
}

function asText(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

function folded(summary, body, extra) {
  return h("details", extra || {}, h("summary", {}, summary), h("pre", {}, body));
}

// One message, as the codec's wire form gives it: put in the page as text, the
// assistant's markdown through the safe renderer (markdown.js).
function renderMessage(message) {
  const kind = message.type;
  let role = "other";
  let body;
  if (kind === "System") {
    role = "system";
    body = folded("system message", asText(message.system_message));
  } else if (kind === "Instruction") {
    role = "user";
    body = h("div", {class: "body"}, asText(message.instruction));
  } else if (kind === "AssistantResponse") {
    role = "assistant";
    body = h("div", {class: "body"}, renderMarkdown(asText(message.assistant_response)));
  } else if (kind === "ActionRequest") {
    role = "tool-call";
    body = folded(`tool call: ${message.function}`, asText(message.arguments));
  } else if (kind === "ActionResponse") {
    role = "tool-result";
    const failed = message.error !== null && message.error !== undefined;
    body = folded(`tool result: ${message.function}${failed ? " (error)" : ""}`,
      failed ? asText(message.error) : asText(message.output));
  } else {
    body = folded(kind, asText(message));
  }
  const when = message.created_at ? new Date(message.created_at * 1000).toLocaleTimeString() : "";
  return h("li", {class: "message", "data-role": role, "data-id": message.id || ""},
    h("div", {class: "meta"}, h("span", {class: "role"}, role), h("time", {}, when)), body);
}

// ------------------------------------------------------------------ approvals

const refreshApprovals = coalesced(async () => {
  renderApprovals((await api("/v1/approvals")).approvals);
});

function renderApprovals(waiting) {
  state.waiting = new Set(waiting.map((turn) => turn.turn_id));
  const list = document.getElementById("approvals");
  const items = [];
  for (const turn of waiting) {
    for (const call of turn.pending) {
      const key = `${turn.turn_id} ${call.call_id}`;
      const deciding = state.deciding.has(key);
      items.push(h("li", {
          class: "approval", "data-turn-id": turn.turn_id, "data-call-id": call.call_id,
          "data-key": key, "data-deciding": deciding,
        },
        h("div", {}, h("strong", {}, turn.branch), " wants to call ", h("code", {}, call.function)),
        h("pre", {class: "arguments"}, asText(call.arguments)),
        h("div", {class: "decide"},
          h("button", {
            class: "approve", disabled: deciding,
            onclick: () => decide(turn.turn_id, call.call_id, {type: "Approve"}),
          }, "Approve"),
          h("button", {
            class: "deny", disabled: deciding,
            onclick: () => decide(turn.turn_id, call.call_id,
              {type: "Deny", reason: "denied by a person in the pride console"}),
          }, "Deny"))));
    }
  }
  update(list, items.length ? items : [h("li", {class: "empty"}, "nothing waits")]);
}

// Send one decision; the answer comes once the turn has gone on to its end
// (or stops again at another call that waits).
async function decide(turnId, callId, decision) {
  const key = `${turnId} ${callId}`;
  if (state.deciding.has(key)) return;
  state.deciding.add(key);
  for (const button of document.querySelectorAll(`.approval[data-key="${CSS.escape(key)}"] button`)) {
    button.disabled = true;
  }
  try {
    const answer = await fetch(`/v1/turns/${encodeURIComponent(turnId)}/resolve`, {
      method: "POST",
      credentials: "same-origin",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({decisions: {[callId]: decision}}),
    });
    // 409: the turn stopped again at a call that waits (shown once refreshed).
    if (!answer.ok && answer.status !== 409) {
      const error = (await answer.json()).error || {};
      setStatus("error", `${error.type || answer.status}: ${error.message || ""}`);
    }
  } finally {
    state.deciding.delete(key);
    refreshApprovals();
    refreshTree();
  }
}

// ------------------------------------------------------------------ the waterfall

const refreshWaterfall = coalesced(async () => {
  renderWaterfall((await api("/v1/traces?limit=20")).traces);
});

function renderWaterfall(traces) {
  const list = document.getElementById("waterfall");
  const items = traces.map((root) => h("li", {class: "trace", "data-key": root.id},
    h("ul", {class: "spans"}, renderSpan(root, Math.max(root.duration_ms, 0.001), 0)),
    root.dropped ? h("p", {class: "empty"}, `${root.dropped} more calls not kept`) : null));
  update(list, items.length ? items : [h("li", {class: "empty"}, "no turn yet")]);
}

function spanLabel(span) {
  const detail = span.detail || {};
  if (span.kind === "turn") return `${span.branch} · ${span.command}`;
  if (span.kind === "model") {
    const tokens = (detail.input_tokens || 0) + (detail.output_tokens || 0);
    return `model ${span.name}` + (tokens ? ` · ${tokens} tokens · ${money(detail.cost_usd)}` : "");
  }
  return `tool ${span.name}(${detail.arguments || ""})`;
}

// One span as a row (its label, then a bar placed on the tree's time line),
// the spans under it nested in a list below it.
function renderSpan(span, total, depth) {
  const bar = h("div", {class: "bar", title: `${duration(span.duration_ms)} · ${span.outcome}`});
  bar.style.left = `${Math.min(100, (span.start_ms / total) * 100)}%`;
  bar.style.width = `${Math.max(0, Math.min(100, (span.duration_ms / total) * 100))}%`;
  const label = h("span", {class: "label"}, spanLabel(span));
  label.style.paddingLeft = `${depth * 1.2}em`;
  return h("li", {
      class: "span", "data-kind": span.kind, "data-name": span.name, "data-branch": span.branch,
      "data-turn-id": span.turn_id || "", "data-outcome": span.outcome,
    },
    h("div", {class: "row"}, label, h("span", {class: "took"}, duration(span.duration_ms)),
      h("div", {class: "track"}, bar)),
    span.children.length
      ? h("ul", {class: "spans"}, span.children.map((child) => renderSpan(child, total, depth + 1)))
      : null);
}

// ------------------------------------------------------------------ flows

const SVG = "http://www.w3.org/2000/svg";
const NODE_W = 150, NODE_H = 34, GAP_X = 60, GAP_Y = 16;

function svg(tag, attributes, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes || {})) element.setAttribute(key, String(value));
  for (const child of children) {
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

const refreshFlows = coalesced(async () => {
  renderFlows((await api("/v1/flows")).flows.slice(0, 5));
});

function renderFlows(runs) {
  const items = runs.map((run) => h("li", {
      class: "flow", "data-key": run.flow_id, "data-name": run.name || "", "data-state": run.state,
    },
    h("div", {class: "flow-head"}, h("strong", {}, run.name || "flow"), ` · ${run.state}`),
    drawFlow(run)));
  update(document.getElementById("flows"), items.length ? items : [h("li", {class: "empty"}, "no flow yet")]);
}

// A run's graph: each node in the column of its longest chain of dependencies,
// an edge from each dependency; the node's state is its colour.
function drawFlow(run) {
  const byName = new Map(run.nodes.map((node) => [node.name, node]));
  const column = new Map();
  const place = (name, seen) => {
    if (column.has(name)) return column.get(name);
    if (seen.has(name)) return 0;  // a cycle cannot run; drawn flat rather than looping
    seen.add(name);
    const deps = (byName.get(name)?.depends_on || []).filter((dep) => byName.has(dep));
    const at = deps.length ? 1 + Math.max(...deps.map((dep) => place(dep, seen))) : 0;
    column.set(name, at);
    return at;
  };
  run.nodes.forEach((node) => place(node.name, new Set()));
  const rows = new Map();
  const position = new Map();
  for (const node of run.nodes) {
    const x = column.get(node.name);
    const y = rows.get(x) || 0;
    rows.set(x, y + 1);
    position.set(node.name, {x: x * (NODE_W + GAP_X) + 2, y: y * (NODE_H + GAP_Y) + 2});
  }
  const width = (Math.max(0, ...column.values()) + 1) * (NODE_W + GAP_X) - GAP_X + 4;
  const height = Math.max(1, ...rows.values()) * (NODE_H + GAP_Y) - GAP_Y + 4;
  const picture = svg("svg", {class: "graph", width, height, viewBox: `0 0 ${width} ${height}`,
    role: "img", "aria-label": `flow ${run.name || ""}`});
  for (const node of run.nodes) {
    const to = position.get(node.name);
    for (const dep of node.depends_on) {
      const from = position.get(dep);
      if (!from) continue;
      const x1 = from.x + NODE_W, y1 = from.y + NODE_H / 2, x2 = to.x, y2 = to.y + NODE_H / 2;
      const bend = (x2 - x1) / 2;
      picture.append(svg("path", {
        class: "edge", "data-from": dep, "data-to": node.name,
        d: `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`,
      }));
    }
  }
  for (const node of run.nodes) {
    const at = position.get(node.name);
    const took = node.duration === null || node.duration === undefined ? node.state
      : `${node.state} · ${duration(node.duration * 1000)}`;
    picture.append(svg("g", {
        class: "node", "data-node": node.name, "data-state": node.state,
        transform: `translate(${at.x},${at.y})`,
      },
      svg("title", {}, `${node.name}: ${node.command || node.state}${node.error ? " (" + node.error + ")" : ""}`),
      svg("rect", {width: NODE_W, height: NODE_H, rx: 5}),
      svg("text", {x: 8, y: 14, class: "node-name"}, node.name),
      svg("text", {x: 8, y: 28, class: "node-state"}, took)));
  }
  return picture;
}

// ------------------------------------------------------------------ events

function listen() {
  // RunSuspended comes as a RunFailed; the node signals are asked for by name.
  const types = SIGNALS.filter((name) => name !== "RunSuspended").join(",");
  const events = new EventSource(`/v1/events?types=${types}`);
  events.addEventListener("open", () => {
    setStatus("live", "live");
    refreshTree();  // whatever happened while the stream was down
    refreshApprovals();
    refreshWaterfall();
    refreshFlows();
  });
  events.addEventListener("error", () => setStatus("reconnecting", "reconnecting"));
  for (const name of SIGNALS) {
    events.addEventListener(name, (event) => onSignal(name, JSON.parse(event.data)));
  }
  events.addEventListener("dropped", () => {
    refreshTree();
    refreshApprovals();
  });
}

function onSignal(name, signal) {
  refreshTree();
  if (name.startsWith("Run")) refreshWaterfall();
  if (name.startsWith("Node")) refreshFlows();
  if (name === "ApprovalRequested" || name === "RunSuspended" || name === "RunEnd"
      || name === "RunFailed") {
    refreshApprovals();
  }
  const open = state.conversation;
  if (open && signal.branch_name === open.branch && (name === "RunEnd" || name === "RunFailed"
      || name === "RunSuspended")) {
    loadNewer();
  }
}

document.addEventListener("DOMContentLoaded", () => {
  listen();
  setInterval(tick, 250);
});
