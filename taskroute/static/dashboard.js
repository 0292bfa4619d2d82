// taskroute customer dashboard: no build step, no dependencies.
// The token lives in localStorage; data comes from /graphql. Updates arrive over the
// graphql-transport-ws subscription `forecastUpdated` (token in connection_init); if the
// socket or the subscription fails, the page polls over HTTP instead, so it works either way.
"use strict";

const TOKEN_KEY = "taskroute.token";
const params = new URLSearchParams(location.search);
const POLL_MS = Math.max(200, Number(params.get("poll")) || 5000);

const PROJECTS_QUERY = `query Dashboard {
  projects(first: 50) { edges { node {
    id name status completedAt deadline
    progress { total open claimed done failed canceled }
    itemProgress { total resolved }
    remainingHistory(first: 120) { bucketSeconds edges { node { at remaining added finished } } }
    progressBySkill { skill total open claimed done failed canceled }
    forecast { remaining eta etaEarly etaLate onTrack atRisk throughputPerHour reasons
                bySkill { skill remaining throughputPerHour extraExpertsNeeded reason } }
    alertHistory(first: 5) { edges { node { id kind message createdAt } } }
  } } }
}`;

let socket = null;
let pollTimer = null;
let reloadTimer = null;
let subscribed = new Set();
let showCompleted = false;
let lastNodes = [];

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

function token() { return localStorage.getItem(TOKEN_KEY); }

function setLive(mode, text) {
  $("live").dataset.mode = mode;
  $("live").textContent = text;
}

async function gql(query, variables = {}) {
  const resp = await fetch("/graphql", {
    method: "POST",
    headers: { "Content-Type": "application/json", "Authorization": `Bearer ${token()}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = await resp.json();
  if (body.errors && body.errors.length) throw new Error(body.errors[0].message);
  return body.data;
}

function fmt(ts) { return ts ? new Date(ts).toLocaleString() : "—"; }

function count(n, one, many) { return `${n} ${n === 1 ? one : many}`; }

function pct(done, total, canceled) {
  const denom = total - canceled;
  return denom > 0 ? Math.round((100 * done) / denom) : 100;
}

function bar(percent, label) {
  const fill = el("div", { class: "fill" });
  fill.style.width = `${percent}%`;
  return el("div", { class: "bar", role: "progressbar", "aria-valuemin": "0",
                     "aria-valuemax": "100", "aria-valuenow": String(percent),
                     "aria-label": label }, fill);
}

function forecastLine(p, f) {
  const deadline = `deadline ${fmt(p.deadline)}`;
  if (p.status === "completed") return `${deadline} · completed ${fmt(p.completedAt)}`;
  if (!f.eta) {
    const why = f.reasons.length ? f.reasons.join("; ") : "no measured pace yet";
    return `${deadline} · forecast unknown: ${why} · ${f.remaining} remaining`;
  }
  const range = f.etaLate && f.etaEarly !== f.etaLate
    ? ` (between ${fmt(f.etaEarly)} and ${fmt(f.etaLate)})` : "";
  return `${deadline} · forecast ${fmt(f.eta)}${range} · ${f.remaining} remaining · ` +
    `${f.throughputPerHour.toFixed(1)}/h`;
}

// One judgement badge, never a reassuring one without grounds: completed, at risk, on track
// only when the forecast says so, else "forecast unknown" (no measured pace yet).
function verdict(p, f) {
  if (p.status === "completed") return ["done", "completed", "completed"];
  if (p.status === "canceled") return null;
  if (f.atRisk) return ["at-risk", "at-risk", "at risk"];
  if (p.deadline && f.onTrack) return ["on-track", "on-track", "on track"];
  if (p.deadline && !f.eta) return ["unknown", "unknown", "forecast unknown"];
  return null;
}

function alertList(alerts) {
  const list = el("ul", { class: "alerts", "data-testid": "alerts" });
  for (const a of alerts) {
    list.append(el("li", { class: a.kind, "data-testid": "alert" },
      el("time", { datetime: a.createdAt }, fmt(a.createdAt)), ` — ${a.message}`));
  }
  return list;
}

// What needs a look comes first: at risk, then the nearest deadline, then projects without one
// (newest first, as listed); canceled and completed ones last.
function rank(p) {
  if (p.status === "completed") return 3;
  if (p.status === "canceled") return 2;
  return p.forecast.atRisk ? 0 : 1;
}

function ordered(nodes) {
  const deadline = (p) => (p.deadline ? Date.parse(p.deadline) : Infinity);
  return nodes.map((p, i) => [p, i]).sort(([a, i], [b, j]) =>
    rank(a) - rank(b) || deadline(a) - deadline(b) || i - j).map(([p]) => p);
}

function renderProject(p) {
  const g = p.progress;
  const f = p.forecast;
  const items = p.itemProgress;
  // an item with redundancy k has k answer slots: progress is told in items, answers second
  const percent = items.total > 0 ? Math.round((100 * items.resolved) / items.total)
    : pct(g.done, g.total, g.canceled);
  const title = el("h2", {}, p.name);
  // active and completed speak through the verdict badge; ingesting and canceled say so here
  if (p.status !== "active" && p.status !== "completed") {
    title.append(el("span", { class: "badge status", "data-testid": "status" }, p.status));
  }
  const v = verdict(p, f);
  if (v) title.append(el("span", { class: `badge ${v[0]}`, "data-testid": v[1] }, v[2]));
  const card = el("article", { class: "project", "data-project": p.id, "data-status": p.status },
    title,
    bar(percent, `${p.name} progress`),
    el("div", { class: "numbers", "data-testid": "numbers" },
       `${items.resolved} of ${count(items.total, "item", "items")} · ` +
       `${g.done} of ${count(g.total, "answer", "answers")} · ` +
       `${g.open} open · ${g.claimed} in progress · ${g.failed} failed · ${percent}%`),
    el("div", { class: "numbers", "data-testid": "forecast" }, forecastLine(p, f)));
  const live = p.status === "active";
  const history = p.remainingHistory.edges.map((e) => e.node);
  if (history.length) {
    card.append(burndownChart({
      history, bucketSeconds: p.remainingHistory.bucketSeconds, deadline: p.deadline,
      forecast: live && f.remaining > 0 ? f : null,
      end: p.status === "completed" ? p.completedAt : null,
      label: `${p.name}: remaining work over time`,
    }));
  }
  if (live && f.bySkill.length) {
    card.append(throughputChart({ skills: f.bySkill, deadline: p.deadline,
                                  label: `${p.name}: throughput per skill` }));
  }
  const bySkill = new Map(f.bySkill.map((s) => [s.skill, s]));
  for (const s of p.progressBySkill) {
    const why = bySkill.get(s.skill)?.reason;  // "no present expert holds `x`", "N more ..."
    card.append(el("div", { class: "skill", "data-skill": s.skill },
      `${s.skill}: ${s.done}/${s.total}` + (why ? ` · ${why}` : ""),
      bar(pct(s.done, s.total, s.canceled), `${p.name} ${s.skill} progress`)));
  }
  const alerts = p.alertHistory.edges.map((e) => e.node);
  if (alerts.length) card.append(alertList(alerts));
  return card;
}

async function load() {
  if (!token()) return;
  try {
    const data = await gql(PROJECTS_QUERY);
    const nodes = data.projects.edges.map((e) => e.node);
    lastNodes = nodes;
    render();
    $("message").textContent = nodes.length ? "" : "No projects yet.";
    subscribeAll(nodes.map((n) => n.id));
  } catch (err) {
    $("message").textContent = `Could not load projects: ${err.message}`;
  }
}

function render() {
  const sorted = ordered(lastNodes);
  const open = sorted.filter((p) => p.status !== "completed");
  const done = sorted.filter((p) => p.status === "completed");
  $("projects").replaceChildren(...open.map(renderProject));
  const toggle = $("toggle-completed");
  toggle.hidden = done.length === 0;
  toggle.textContent = showCompleted ? `Hide ${done.length} completed`
    : `Show ${done.length} completed`;
  toggle.setAttribute("aria-expanded", String(showCompleted));
  $("completed").replaceChildren(...(showCompleted ? done.map(renderProject) : []));
}

function scheduleReload() {
  clearTimeout(reloadTimer);
  reloadTimer = setTimeout(load, 100);
}

function startPolling(reason) {
  if (pollTimer) return;
  setLive("polling", `polling (${reason})`);
  pollTimer = setInterval(load, POLL_MS);
}

function subscribeAll(ids) {
  if (!socket || socket.readyState !== WebSocket.OPEN || !socket.acked) return;
  for (const id of ids) {
    if (subscribed.has(id)) continue;
    subscribed.add(id);
    socket.send(JSON.stringify({
      id: `forecast-${id}`, type: "subscribe",
      payload: { query: `subscription($p: ID!) { forecastUpdated(projectId: $p) { forecast { remaining } } }`,
                 variables: { p: id } },
    }));
  }
}

function connect() {
  if (!window.WebSocket) { startPolling("no WebSocket"); return; }
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/graphql`;
  let ws;
  try { ws = new WebSocket(url, "graphql-transport-ws"); } catch (e) { startPolling("socket refused"); return; }
  socket = ws;
  subscribed = new Set();
  const ackTimeout = setTimeout(() => { if (!ws.acked) startPolling("no ack"); }, 5000);
  ws.onopen = () => ws.send(JSON.stringify({
    type: "connection_init", payload: { Authorization: `Bearer ${token()}` } }));
  ws.onmessage = (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.type === "connection_ack") {
      ws.acked = true;
      clearTimeout(ackTimeout);
      setLive("live", "live");
      load();
    } else if (msg.type === "next") {
      if (msg.payload && msg.payload.errors) startPolling("subscription refused");
      else scheduleReload();
    } else if (msg.type === "error") {
      startPolling("subscription refused");
    } else if (msg.type === "ping") {
      ws.send(JSON.stringify({ type: "pong" }));
    }
  };
  ws.onclose = () => { clearTimeout(ackTimeout); if (socket === ws) startPolling("socket closed"); };
}

function signIn(value) {
  localStorage.setItem(TOKEN_KEY, value.trim());
  $("token").value = "";
  load();
  connect();
}

$("toggle-completed").addEventListener("click", () => { showCompleted = !showCompleted; render(); });
$("auth").addEventListener("submit", (ev) => { ev.preventDefault(); signIn($("token").value); });
$("signout").addEventListener("click", () => {
  localStorage.removeItem(TOKEN_KEY);
  clearInterval(pollTimer); pollTimer = null;
  if (socket) { const s = socket; socket = null; s.close(); }
  $("projects").replaceChildren();
  $("completed").replaceChildren();
  $("toggle-completed").hidden = true;
  lastNodes = [];
  setLive("off", "offline");
});

if (token()) { load(); connect(); }
