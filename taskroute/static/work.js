// The expert workbench: claim, show the payload, a form from the answer schema,
// heartbeat with a countdown, submit, move on. With nothing to do it waits on the
// `taskAvailable` subscription (graphql-transport-ws, token in connection_init): no polling.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { token: null, skills: null, claim: null, fields: [], hb: null, tick: null, ws: null };

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

async function api(path, body) {
  const r = await fetch(path, {
    method: "POST",
    headers: { "Authorization": `Bearer ${state.token}`, "Content-Type": "application/json" },
    body: body === undefined ? "{}" : JSON.stringify(body),
  });
  let data = null;
  if (r.status !== 204) { try { data = await r.json(); } catch (e) { data = null; } }
  return { status: r.status, data, retryAfter: r.headers.get("Retry-After") };
}

// Errors in words, not codes.
function explain(err, status) {
  const code = err && err.error ? err.error.code : "";
  if (code === "LEASE_EXPIRED") {
    return "Your time on this task ran out, so it went back to the pool for someone else. " +
      "Nothing is held against you; here is the next one.";
  }
  if (code === "PROJECT_CANCELED") {
    return "The customer canceled this project. You may still submit this task before the " +
      "countdown ends; no new tasks will come from it.";
  }
  if (code === "NOT_FOUND") return "This task is no longer yours (it was taken back). Moving on.";
  if (status === 401) return "That token was not accepted. Check it and paste it again.";
  if (status === 403) return "This token may not claim tasks (is it an expert's token?).";
  if (status === 503) return "The server is busy or restarting; trying again in a moment.";
  return (err && err.error && err.error.message) || `Unexpected answer from the server (${status}).`;
}

function stopTimers() {
  clearTimeout(state.hb); clearInterval(state.tick); state.hb = null; state.tick = null;
}

function closeSocket() {
  if (state.ws) { const ws = state.ws; state.ws = null; ws.onclose = null; ws.close(); }
}

async function claimNext() {
  stopTimers();
  state.claim = null;  // nothing held until the claim answers (the held one comes back)
  closeSocket();
  $("task").hidden = true;
  setStatus("Looking for a task…");
  const body = state.skills ? { skills: state.skills } : {};
  const r = await api("/v1/tasks/next", body);
  if (r.status === 204) { waitForWork(); return; }
  if (r.status === 404 || r.status === 403) { showExpertsOnly(); return; }  // not a lease: the token
  if (r.status !== 200) {
    setStatus(explain(r.data, r.status), true);
    if (r.status === 503) setTimeout(claimNext, 2000);
    return;
  }
  await showTask(r.data);
}

// Nothing to do: say so, and wait for the server's hint. The server also hints at tasks that
// opened before the subscription started, so nothing slips between the empty claim and here.
function waitForWork() {
  setStatus("Nothing to do right now. Waiting for new work; this page updates by itself.");
  const url = `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/graphql`;
  const ws = new WebSocket(url, "graphql-transport-ws");
  state.ws = ws;
  ws.onopen = () => {
    ws.send(JSON.stringify({ type: "connection_init",
      payload: { Authorization: `Bearer ${state.token}` } }));
    ws.send(JSON.stringify({ id: "1", type: "subscribe", payload: {
      query: "subscription($s: [String!]) { taskAvailable(skills: $s) { skill } }",
      variables: { s: state.skills } } }));
  };
  ws.onmessage = (ev) => {
    const msg = JSON.parse(ev.data);
    if (msg.type === "ping") ws.send(JSON.stringify({ type: "pong" }));
    if (msg.type === "next") claimNext();
    if (msg.type === "error") setStatus("The server refused to notify this token about new work.", true);
  };
  ws.onclose = () => {
    if (state.ws !== ws) return;
    state.ws = null;
    // One retry after a pause (the server may be restarting), not a loop of requests.
    setStatus("Lost the connection to the server; reconnecting in 5 seconds…", true);
    setTimeout(claimNext, 5000);
  };
}

function isUrl(s) { return typeof s === "string" && /^https?:\/\/\S+$/.test(s); }

function renderValue(el, value) {
  el.textContent = "";
  if (typeof value === "string") {
    if (isUrl(value)) {
      const a = document.createElement("a");
      a.href = value; a.textContent = value; a.target = "_blank"; a.rel = "noopener noreferrer";
      el.appendChild(a);
    } else {
      el.textContent = value;
    }
  } else if (value && typeof value === "object" && Object.keys(value).length === 1 &&
             typeof value.text === "string") {
    el.textContent = value.text;
  } else {
    el.textContent = JSON.stringify(value, null, 2);
  }
}

async function showTask(claim) {
  state.claim = claim;
  const t = claim.task;
  $("receipt").hidden = true;
  $("skill").textContent = `Skill: ${t.skill}`;
  state.payload = t.payload;
  if (t.payload_url) {
    $("payload").textContent = "Loading the payload (delivered by link)…";
    const r = await fetch(t.payload_url, { headers: { Authorization: `Bearer ${state.token}` } });
    if (r.ok) renderValue($("payload"), state.payload = await r.json());
    else $("payload").textContent = "The payload link could not be opened; claim again for a fresh one.";
  } else {
    renderValue($("payload"), t.payload);
  }
  buildForm(t.answer_schema);
  showLayout(t, state.payload);
  showInstructions(t.instructions);
  $("task").hidden = false;
  setStatus("Here is your task. Answer below and submit.");
  $("priority-hint").hidden = true;
  startLease(claim.lease_until);
}

// --- the form, from the answer schema ------------------------------------------------

function kindOf(s) {
  if (!s || typeof s !== "object") return "json";
  if (Array.isArray(s.enum)) return "enum";
  if (s.type === "string") return "string";
  if (s.type === "number" || s.type === "integer") return "number";
  if (s.type === "boolean") return "boolean";
  return "json";
}

function makeField(name, schema, label) {
  const kind = kindOf(schema);
  const wrap = document.createElement("div");
  wrap.className = "field"; wrap.dataset.field = name;
  const title = document.createElement("label");
  title.className = "name"; title.textContent = (schema && schema.title) || label;
  wrap.appendChild(title);
  const f = { name, kind, schema, wrap, value: undefined };
  if (kind === "enum") {
    const box = document.createElement("div"); box.className = "choices";
    for (const option of schema.enum) {
      const b = document.createElement("button");
      b.type = "button"; b.textContent = typeof option === "string" ? option : JSON.stringify(option);
      b.dataset.option = JSON.stringify(option);
      b.onclick = () => {
        f.value = option;
        for (const x of box.children) x.classList.remove("chosen");
        b.classList.add("chosen");
      };
      box.appendChild(b);
    }
    wrap.appendChild(box);
  } else if (kind === "string") {
    f.input = document.createElement("textarea");
  } else if (kind === "number") {
    f.input = document.createElement("input"); f.input.type = "number";
    f.input.step = schema.type === "integer" ? "1" : "any";
  } else if (kind === "boolean") {
    f.input = document.createElement("input"); f.input.type = "checkbox";
  } else {
    f.input = document.createElement("textarea"); f.input.className = "json";
    f.input.placeholder = "JSON, e.g. {\"key\": \"value\"}";
  }
  if (f.input) { f.input.name = name; f.input.id = `field-${name}`; wrap.appendChild(f.input); }
  const err = document.createElement("p"); err.className = "error"; err.hidden = true;
  wrap.appendChild(err); f.error = err;
  return f;
}

function buildForm(schema) {
  const box = $("fields");
  box.textContent = "";
  state.fields = [];
  state.objectForm = !!(schema && schema.type === "object" && schema.properties);
  if (state.objectForm) {
    for (const [name, sub] of Object.entries(schema.properties)) {
      state.fields.push(makeField(name, sub, name));
    }
  } else {
    state.fields.push(makeField("$", schema, "Your answer"));
  }
  for (const f of state.fields) box.appendChild(f.wrap);
}

function readField(f) {
  if (f.kind === "enum") return f.value;
  if (f.kind === "string") return f.input.value === "" ? undefined : f.input.value;
  if (f.kind === "number") return f.input.value === "" ? undefined : Number(f.input.value);
  if (f.kind === "boolean") return f.input.checked;
  if (f.input.value.trim() === "") return undefined;
  try { return JSON.parse(f.input.value); } catch (e) { throw { field: f, message: "This is not valid JSON." }; }
}

// The inverse of readField: shows `v` in the field (a value the field cannot show leaves it
// empty, as a new form starts).
function writeField(f, v) {
  if (f.kind === "enum") {
    const b = f.wrap.querySelector(`.choices button[data-option='${CSS.escape(JSON.stringify(v))}']`);
    if (b) b.onclick();
  } else if (f.kind === "string") f.input.value = typeof v === "string" ? v : "";
  else if (f.kind === "number") f.input.value = typeof v === "number" ? String(v) : "";
  else if (f.kind === "boolean") f.input.checked = v === true;
  else f.input.value = v === undefined ? "" : JSON.stringify(v, null, 2);
}

function clearErrors() {
  for (const f of state.fields) { f.error.hidden = true; f.error.textContent = ""; }
  $("answer-error").hidden = true;
}

function showError(path, message) {
  // "$.label" or "$.items[0]" -> the form field "label"/"items"; "$" -> the only field
  const m = /^\$\.([^.[]+)/.exec(path || "");
  const name = m ? m[1] : "$";
  const f = state.fields.find((x) => x.name === name) ||
            (state.objectForm ? null : state.fields[0]);
  const target = f ? f.error : $("answer-error");
  target.textContent = message; target.hidden = false;
}

async function submitAnswer(ev) {
  ev.preventDefault();
  clearErrors();
  let answer;
  try {
    if (state.review) {
      answer = readReview();
      if (answer === undefined) return;
    } else if (state.objectForm) {
      answer = {};
      for (const f of state.fields) {
        const v = readField(f);
        if (v !== undefined) answer[f.name] = v;
      }
    } else {
      answer = readField(state.fields[0]);
      if (answer === undefined) { showError("$", "Please give an answer."); return; }
    }
  } catch (e) { e.field.error.textContent = e.message; e.field.error.hidden = false; return; }
  $("submit").disabled = true;
  const r = await api(`/v1/assignments/${state.claim.assignment_id}/submit`, { answer });
  $("submit").disabled = false;
  if (r.status === 200) {
    stopTimers();
    notice("");
    $("receipt").textContent =
      `Submitted. Receipt ${r.data.id.slice(0, 8)}, paid ${r.data.pay_cents} cents.`;
    $("receipt").hidden = false;
    await claimNext();
    return;
  }
  if (r.status === 422) {
    const e = r.data.error;
    const details = e.details || {};
    showError(details.path, e.message.replace(/^answer does not match the answer schema at \S+: /,
                                              "Not accepted: "));
    return;
  }
  if (r.status === 409 || r.status === 404) { notice(explain(r.data, r.status)); await claimNext(); }
  else setStatus(explain(r.data, r.status), true);
}

// --- layouts: GRADE, PAIRWISE, REVIEW, and the review-task view ------------------------
// Each builds on the form above (buildForm) and the payload already shown; GENERIC is that.

function showLayout(t, payload) {
  const task = $("task");
  task.className = `layout-${(t.layout || "GENERIC").toLowerCase()}`;
  task.dataset.layout = t.layout || "GENERIC";
  $("candidates").hidden = true; $("document").hidden = true;
  $("review-of").hidden = true; $("verdict").hidden = true;
  $("payload").hidden = false; $("fields").hidden = false;
  state.review = null;
  if (t.layout === "GRADE") gradeLayout(t.answer_schema);
  else if (t.layout === "PAIRWISE") pairwiseLayout(t, payload);
  else if (t.layout === "REVIEW") documentLayout(payload);
  if (t.layout && t.layout !== "GENERIC") orderFields(t.answer_schema);
  if (t.review_of) reviewTaskView(t);
}

// Stored schemas lose their key order (Postgres jsonb), so a layout's form puts the choices
// first (the `required` order, then the others), free text last.
function orderFields(schema) {
  const required = (schema && Array.isArray(schema.required)) ? schema.required : [];
  const rank = (f) => (f.kind === "string" ? 2000 : 0) +
    (required.includes(f.name) ? required.indexOf(f.name) : 1000);
  state.fields.sort((x, y) => rank(x) - rank(y));
  for (const f of state.fields) $("fields").appendChild(f.wrap);
}

// A rubric: each integer criterion becomes its scale of buttons (minimum..maximum).
function gradeLayout(schema) {
  const props = (schema && schema.properties) || {};
  const box = $("fields"); box.textContent = ""; state.fields = [];
  for (const [name, sub] of Object.entries(props)) {
    let s = sub;
    if (sub.type === "integer" && Number.isInteger(sub.minimum) && Number.isInteger(sub.maximum)) {
      const scale = [];
      for (let v = sub.minimum; v <= sub.maximum; v++) scale.push(v);
      s = { title: sub.title, enum: scale };
    }
    const f = makeField(name, s, name);
    f.wrap.classList.add(name === "comment" ? "comment" : "criterion");
    state.fields.push(f); box.appendChild(f.wrap);
  }
}

// Two candidates side by side, in the order drawn for this assignment; the expert picks a
// side, the answer names the candidate (a / b) so the customer can undo position bias.
function pairwiseLayout(t, payload) {
  const keys = t.candidate_keys || ["a", "b"];
  const order = t.candidate_order === "ba" ? ["b", "a"] : ["a", "b"];
  const side = { a: keys[0], b: keys[1] };
  const panes = $("candidates"); panes.textContent = ""; panes.hidden = false;
  order.forEach((which, i) => {
    const pane = document.createElement("div");
    pane.className = "candidate"; pane.dataset.candidate = which;
    const h = document.createElement("h3"); h.textContent = i === 0 ? "Left" : "Right";
    const body = document.createElement("div"); body.className = "candidate-body";
    renderValue(body, payload && typeof payload === "object" ? payload[side[which]] : null);
    pane.append(h, body); panes.appendChild(pane);
  });
  $("payload").hidden = true;
  const winner = state.fields.find((f) => f.name === "winner");
  if (!winner) return;
  const labels = { [order[0]]: "Left is better", [order[1]]: "Right is better", tie: "A tie" };
  const box = winner.wrap.querySelector(".choices");
  const buttons = [...box.children];
  const byValue = Object.fromEntries(winner.schema.enum.map((v, i) => [v, buttons[i]]));
  box.textContent = "";
  for (const v of [order[0], "tie", order[1]]) {
    const b = byValue[v];
    if (!b) continue;
    b.textContent = labels[v]; b.dataset.value = v; box.appendChild(b);
  }
}

// A long document scrolled beside the form.
function documentLayout(payload) {
  const doc = $("document"); doc.hidden = false;
  const text = typeof payload === "string" ? payload
    : payload && typeof payload.document === "string" ? payload.document
    : payload && typeof payload.text === "string" ? payload.text : null;
  if (text === null) renderValue(doc, payload); else doc.textContent = text;
  $("payload").hidden = true;
}

// A review task: the answer under review, and accept / reject (a reason) / correct (the
// layout's form, which starts as the answer under review: the reviewer changes what is wrong).
function reviewTaskView(t) {
  const shown = $("review-of"); shown.hidden = false;
  $("review-answer").textContent = JSON.stringify(t.review_of.answer, null, 2);
  $("verdict").hidden = false;
  state.review = { verdict: null };
  for (const b of $("verdict").querySelectorAll("button[data-verdict]")) {
    b.classList.remove("chosen");
    b.onclick = () => {
      clearErrors();
      state.review.verdict = b.dataset.verdict;
      for (const x of $("verdict").querySelectorAll("button")) x.classList.remove("chosen");
      b.classList.add("chosen");
      $("fields").hidden = b.dataset.verdict !== "correct";
    };
  }
  $("review-reason").value = "";
  const reviewed = t.review_of.answer;
  if (state.objectForm) {
    const fields = reviewed && typeof reviewed === "object" ? reviewed : {};
    for (const f of state.fields) writeField(f, fields[f.name]);
  } else if (state.fields.length) writeField(state.fields[0], reviewed);
  $("fields").hidden = true;
}

function readReview() {
  const verdict = state.review.verdict;
  if (!verdict) { showError(null, "Choose accept, reject or correct."); return undefined; }
  const answer = { verdict };
  const reason = $("review-reason").value.trim();
  if (reason) answer.reason = reason;
  if (verdict === "reject" && !reason) {
    showError(null, "Say why you reject it: the expert is owed a reason."); return undefined;
  }
  if (verdict === "correct") {
    if (state.objectForm) {
      answer.correction = {};
      for (const f of state.fields) {
        const v = readField(f);
        if (v !== undefined) answer.correction[f.name] = v;
      }
    } else {
      answer.correction = readField(state.fields[0]);
    }
  }
  return answer;
}

function notice(text) { $("notice").textContent = text; $("notice").hidden = !text; }

// --- the lease: a countdown and heartbeats ------------------------------------------

function startLease(leaseUntil) {
  state.leaseUntil = new Date(leaseUntil).getTime();
  const draw = () => {
    const left = Math.max(0, Math.round((state.leaseUntil - Date.now()) / 1000));
    const text = `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")} left`;
    $("countdown").textContent = text;
    $("countdown").className = left < 60 ? "low" : "";
  };
  draw();
  state.tick = setInterval(draw, 1000);
  scheduleHeartbeat();
}

function scheduleHeartbeat() {
  // every minute, or a third of the lease left, whichever is sooner (README: heartbeats)
  const left = state.leaseUntil - Date.now();
  state.hb = setTimeout(heartbeat, Math.max(500, Math.min(60000, left / 3)));
}

async function heartbeat() {
  const claim = state.claim;
  const r = await api(`/v1/assignments/${claim.assignment_id}/heartbeat`);
  if (state.claim !== claim) return;
  if (r.status === 200) {
    state.leaseUntil = new Date(r.data.lease_until).getTime();
    $("priority-hint").hidden = !r.data.has_high_priority_tasks;
    scheduleHeartbeat();
    return;
  }
  if (r.status === 503 || r.status === 0) { scheduleHeartbeat(); return; }
  notice(explain(r.data, r.status));
  if (r.data && r.data.error && r.data.error.code === "PROJECT_CANCELED") return;
  await claimNext();
}

$("auth").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.token = $("token").value.trim();
  const skills = $("skills").value.split(",").map((s) => s.trim()).filter(Boolean);
  state.skills = skills.length ? skills : null;
  if (!state.token) { setStatus("Paste your expert token first.", true); return; }
  signIn();
});
$("answer").addEventListener("submit", submitAnswer);


// --- who is signing in: experts only ---------------------------------------------------
// A customer's or admin's token is answered NOT_FOUND ("only experts can do this") by the
// claim, like an assignment that is gone; `me` tells the two apart before the first claim.

async function gql(query, variables) {
  const r = await fetch("/graphql", {
    method: "POST",
    headers: { "Authorization": `Bearer ${state.token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ query, variables: variables || {} }),
  });
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  return { status: r.status, body };
}

function showExpertsOnly() {
  stopTimers(); closeSocket();
  state.claim = null;
  $("task").hidden = true; $("show-mywork").hidden = true; $("releases").hidden = true;
  setStatus("This page is for experts: sign in with an expert token " +
            "(this one belongs to a customer or an admin).", true);
}

async function signIn() {
  const r = await gql("{ me { role expert { releasesLeft releasesResetAt } } }");
  if (r.status === 401 || (r.body && r.body.errors &&
      r.body.errors[0].extensions && r.body.errors[0].extensions.code === "UNAUTHENTICATED")) {
    setStatus("That token was not accepted. Check it and paste it again.", true);
    return;
  }
  const me = r.body && r.body.data ? r.body.data.me : null;
  if (!me || me.role !== "expert" || !me.expert) { showExpertsOnly(); return; }
  showReleasesLeft(me.expert.releasesLeft, me.expert.releasesResetAt);
  $("show-mywork").hidden = false;
  claimNext();
}

// --- releases: skip, can't answer, bad item; and on closing the tab ---------------------

function timeOf(iso) {
  return new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function showReleasesLeft(left, resetsAt) {
  const el = $("releases");
  el.textContent = left > 0
    ? `Skips left this hour: ${left}.`
    : `No skips left this hour${resetsAt ? `; the next one at ${timeOf(resetsAt)}` : ""}.`;
  el.hidden = false;
}

const RELEASE_WORDS = { SKIP: "Skipped", CANNOT_ANSWER: "Given back (can't answer)",
                        BAD_ITEM: "Reported as a bad item" };

async function releaseClaim(reason) {
  const claim = state.claim;
  if (!claim) return;
  for (const b of $("release-actions").querySelectorAll("button")) b.disabled = true;
  const r = await api(`/v1/assignments/${claim.assignment_id}/release`, { reason });
  for (const b of $("release-actions").querySelectorAll("button")) b.disabled = false;
  if (state.claim !== claim) return;
  if (r.status === 200) {
    state.claim = null;
    showReleasesLeft(r.data.releases_left, r.data.resets_at);
    notice(`${RELEASE_WORDS[reason]}. It goes to someone else; here is the next task.`);
    await claimNext();
    return;
  }
  const err = r.data && r.data.error;
  if (r.status === 429 && err && err.code === "TOO_MANY_RELEASES") {
    const at = err.details && err.details.resetsAt;
    showReleasesLeft(0, at);
    notice(`You have used this hour's skips. The next one is allowed at ${at ? timeOf(at) : "the top of the hour"}; ` +
           "this task stays yours meanwhile.");
    return;
  }
  notice(explain(r.data, r.status));
  if (r.status === 409 || r.status === 404) await claimNext();
}

$("skip").addEventListener("click", () => releaseClaim("SKIP"));
$("cannot-answer").addEventListener("click", () => releaseClaim("CANNOT_ANSWER"));
$("bad-item").addEventListener("click", () => releaseClaim("BAD_ITEM"));

// Closing the tab gives the task back at once (presence and forecasts follow the expert);
// keepalive lets the request outlive the page.
window.addEventListener("pagehide", () => {
  const claim = state.claim;
  if (!claim || !state.token) return;
  state.claim = null;
  fetch(`/v1/assignments/${claim.assignment_id}/release`, {
    method: "POST",
    keepalive: true,
    headers: { "Authorization": `Bearer ${state.token}`, "Content-Type": "application/json" },
    body: JSON.stringify({ reason: "SKIP" }),
  }).catch(() => {});
});

// --- instructions: Markdown rendered, then sanitized ------------------------------------
// marked renders, DOMPurify removes scripts, event handlers and anything active; images
// stay only from data: or this origin unless the project allows remote ones.

function allowedImage(src, allowRemote) {
  if (!src) return false;
  if (/^data:image\//i.test(src)) return true;
  let url;
  try { url = new URL(src, location.href); } catch (e) { return false; }
  if (url.origin === location.origin) return true;
  return allowRemote && url.protocol === "https:";
}

function renderInstructions(markdown, allowRemote) {
  const html = marked.parse(markdown, { async: false, gfm: true });
  const clean = DOMPurify.sanitize(html, {
    FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe",
                  "object", "embed", "video", "audio", "source", "picture", "link", "meta"],
    FORBID_ATTR: ["style", "srcset", "action", "formaction", "background", "poster"],
    RETURN_DOM_FRAGMENT: true,
  });
  for (const img of clean.querySelectorAll("img")) {
    if (!allowedImage(img.getAttribute("src"), allowRemote)) {
      const note = document.createElement("span");
      note.className = "blocked-image";
      note.textContent = `[image not shown: ${img.getAttribute("alt") || "remote image"}]`;
      img.replaceWith(note);
    }
  }
  for (const a of clean.querySelectorAll("a")) {
    a.target = "_blank"; a.rel = "noopener noreferrer";
  }
  return clean;
}

function showInstructions(instructions) {
  const box = $("instructions");
  if (!instructions) { box.hidden = true; $("instructions-body").textContent = ""; return; }
  $("instructions-version").textContent = `(version ${instructions.version})`;
  $("instructions-body").replaceChildren(
    renderInstructions(instructions.markdown, !!instructions.allow_remote_images));
  box.hidden = false;
}

// --- my work: answers, pay states, totals, bonuses --------------------------------------

const MY_WORK = `query($a: String) { me { expert {
  work(after: $a, first: 20) { edges { node { assignmentId projectId submittedAt payState
    payCents paidCents rejectionReason autoApprovalAt } } pageInfo { hasNextPage endCursor } }
  earnings { paidCents pendingCents rejectedCents bonusCents nextAutoApprovalAt
    bonuses(first: 20) { amountCents reason projectId createdAt } } } } }`;

const cents = (n) => `$${(n / 100).toFixed(2)}`;

async function loadMyWork(after) {
  const r = await gql(MY_WORK, { a: after || null });
  const me = r.body && r.body.data && r.body.data.me;
  if (!me || !me.expert) { showExpertsOnly(); return; }
  const { work, earnings } = me.expert;
  const e = earnings;
  $("earnings").textContent = `Paid ${cents(e.paidCents)} · pending ${cents(e.pendingCents)}` +
    ` · rejected ${cents(e.rejectedCents)} · bonuses ${cents(e.bonusCents)}` +
    (e.nextAutoApprovalAt ? ` · next automatic approval ${new Date(e.nextAutoApprovalAt).toLocaleString()}` : "");
  const rows = $("work-rows");
  if (!after) rows.textContent = "";
  for (const { node: w } of work.edges) {
    const tr = document.createElement("tr");
    tr.dataset.assignment = w.assignmentId;
    const pay = w.payState === "paid" || w.payState === "reversed" ? cents(w.paidCents) : cents(w.payCents);
    for (const text of [new Date(w.submittedAt).toLocaleString(), w.projectId.slice(0, 8), pay,
                        w.payState, w.rejectionReason || ""]) {
      const td = document.createElement("td"); td.textContent = text; tr.appendChild(td);
    }
    tr.children[3].className = `state-${w.payState}`;
    rows.appendChild(tr);
  }
  const more = $("work-more");
  more.hidden = !work.pageInfo.hasNextPage;
  more.onclick = () => loadMyWork(work.pageInfo.endCursor);
  const bonuses = $("bonus-lines");
  bonuses.textContent = "";
  for (const b of e.bonuses) {
    const li = document.createElement("li");
    li.textContent = `${cents(b.amountCents)}: ${b.reason || "bonus"} (project ${b.projectId.slice(0, 8)}, ${new Date(b.createdAt).toLocaleDateString()})`;
    bonuses.appendChild(li);
  }
  if (!e.bonuses.length) {
    const li = document.createElement("li"); li.textContent = "None yet."; bonuses.appendChild(li);
  }
}

$("show-mywork").addEventListener("click", async () => {
  const box = $("mywork");
  box.hidden = !box.hidden;
  $("show-mywork").textContent = box.hidden ? "My work" : "Hide my work";
  if (!box.hidden) await loadMyWork(null);
});
