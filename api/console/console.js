// The ops console: polls the REST API and offers resume, skip, pause,
// unpause and reset.
"use strict";

// The token lives in session storage: it is gone when the tab closes, and
// another page of the same origin opened later cannot read it. A token an
// older console kept in local storage is moved over once.
const tokenInput = document.getElementById("token");
if (localStorage.getItem("berth-token") !== null) {
  sessionStorage.setItem("berth-token", localStorage.getItem("berth-token"));
  localStorage.removeItem("berth-token");
}
tokenInput.value = sessionStorage.getItem("berth-token") || "";
tokenInput.addEventListener("change", () => { sessionStorage.setItem("berth-token", tokenInput.value); refresh(); });

function headers() {
  const h = { "Accept": "application/json" };
  if (tokenInput.value) h["Authorization"] = "Bearer " + tokenInput.value;
  return h;
}

// ApiError is an answer that is not 2xx: its status, the problem's code (the
// last part of its type) and detail.
class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail);
    this.status = status;
    this.code = code;
  }
}

// Unreachable is a request that got no answer at all.
class Unreachable extends Error {}

// send makes a request with init (its headers from headers()) and returns
// the response once its body is read (as text, or as a Blob when asBlob),
// throwing an ApiError for an answer that is not 2xx and Unreachable for
// none.
async function send(method, path, init, asBlob) {
  let res, text = "", blob = null;
  try {
    res = await fetch(path, { ...init, method });
    if (res.ok && asBlob) blob = await res.blob();
    else text = await res.text();
  } catch (e) {
    throw new Unreachable(e.message);
  }
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* a proxy's HTML page, say */ }
  if (!res.ok) {
    const code = data && data.type ? data.type.split("/").pop() : "";
    throw new ApiError(res.status, code, (data && (data.detail || data.title)) || res.statusText || `HTTP ${res.status}`);
  }
  return { res, data, blob };
}

async function api(method, path, body) {
  const init = { headers: headers() };
  if (body !== undefined) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
  return (await send(method, path, init)).data;
}

// describe says what went wrong with an action, in words and with the
// problem's code.
function describe(e) {
  if (e instanceof Unreachable) return "the host did not answer";
  if (e instanceof ApiError) {
    if (e.status === 401) return "sign in with a token (paste it in Token above)";
    if (e.status === 403) return `not allowed with this token: ${e.message}`;
    return e.code ? `${e.message} (${e.code})` : e.message;
  }
  return e.message;
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  td.textContent = text;
  tr.appendChild(td);
  return td;
}

function when(t) {
  if (!t || t.startsWith("0001-")) return "—";
  const d = new Date(t), now = new Date();
  const secs = Math.round((d - now) / 1000);
  const rel = Math.abs(secs) < 90 ? `${Math.abs(secs)}s` : `${Math.round(Math.abs(secs) / 60)}m`;
  return `${d.toLocaleTimeString()} (${secs >= 0 ? "in " + rel : rel + " ago"})`;
}

function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

// stoppedAt says where a record stopped in plain words: the commit's version
// and which of its events (the API's index counts from 0).
function stoppedAt(r) { return `version ${r.version}, event ${r.index + 1}`; }

// recordPath is the REST path of a parked record (and of its actions):
// every segment is percent-encoded, so an id holding "/", "%", "?", "#" or
// spaces names its own aggregate and no other. ("." and ".." — which
// browsers would remove from a path even encoded — are refused at append.)
function recordPath(r, action) {
  const [sub, type, id] = [r.subscription, r.aggregateType, r.aggregateId].map(s => encodeURIComponent(s));
  return `/v1/subscriptions/${sub}/parked/${type}/${id}` + (action ? `/${action}` : "");
}

function subPath(name, action) { return `/v1/subscriptions/${encodeURIComponent(name)}/${action}`; }

// rowKey names a record's row unambiguously (a type or id may hold "/").
function rowKey(r) { return JSON.stringify([r.subscription, r.aggregateType, r.aggregateId]); }

// Rows are kept across refreshes and rebuilt only when their record
// changed, so what an operator types, and the button they are about to
// click, survive the page's polling.
const reasons = new Map();
const rows = new Map(); // key -> {sig, tr}
const openHistory = new Set(); // keys whose history is unfolded
const details = new Map(); // key -> {sig, detail}: the record's event and what it holds back
const resumed = new Map(); // key -> {lastFailure, at} of a resume from this page, to tell if it failed again

// detailOf fetches (once per version of the record) the event a record
// stopped at and how many later commits it holds back.
async function detailOf(r, key, sig) {
  const have = details.get(key);
  if (have && have.sig === sig) return have.detail;
  const detail = await api("GET", recordPath(r));
  details.set(key, { sig, detail });
  return detail;
}

// throughVersion is the last version a skip of the record passes over: the
// stopped commit and every later one held back when the page looked.
function throughVersion(r, detail) { return r.version + (detail.heldCommits || 0); }

// history lists a record's attempts, park, retries and operator actions,
// oldest first, as the API gives them.
function history(r, key, detail) {
  const entries = r.history || [];
  const d = document.createElement("details");
  d.className = "history";
  d.open = openHistory.has(key);
  d.addEventListener("toggle", () => { if (d.open) openHistory.add(key); else openHistory.delete(key); });
  const summary = document.createElement("summary");
  summary.textContent = `history (${entries.length})`;
  d.appendChild(summary);
  d.appendChild(detail);
  const ol = document.createElement("ol");
  for (const e of entries) {
    const li = document.createElement("li");
    let text = `${new Date(e.time).toLocaleTimeString()} `;
    if (e.action === "attempt" && e.attempt) text += `attempt ${e.attempt} failed`;
    else if (e.action === "parked" && e.attempt) text += `parked after ${plural(e.attempt, "attempt")}`;
    else text += e.action + (e.attempt ? ` (attempt ${e.attempt})` : "");
    if (e.version) text += ` at version ${e.version}`;
    if (e.actor) text += ` by ${e.actor}`;
    if (e.reason) text += `: “${e.reason}”`;
    if (e.error) text += ` — ${e.error.message}` + (e.error.code ? ` (${e.error.code})` : "");
    li.textContent = text;
    ol.appendChild(li);
  }
  d.appendChild(ol);
  return d;
}

// awaiting says why a waiting aggregate has no next retry.
function awaiting(why) {
  switch (why) {
    case "unrecoverable": return "for an operator: unrecoverable, no retry helps";
    case "no-retries": return "for an operator: no long-horizon retries configured";
    default: return "for an operator: its retries are spent";
  }
}

// breakable returns text as nodes that may wrap after ".", "/", ":", "_" or
// "-" (a long subscription or id is one word to the browser otherwise, and
// would break anywhere or spill).
function breakable(text) {
  const f = document.createDocumentFragment();
  for (const part of String(text).split(/(?<=[./:_-])/)) {
    if (f.childNodes.length) f.appendChild(document.createElement("wbr"));
    f.appendChild(document.createTextNode(part));
  }
  return f;
}

function parkedRow(r, key, sig) {
  const tr = document.createElement("tr");
  tr.dataset.key = `${r.subscription}/${r.aggregateType}/${r.aggregateId}`; // for people; may be ambiguous
  tr.dataset.subscription = r.subscription;
  tr.dataset.type = r.aggregateType;
  tr.dataset.id = r.aggregateId;
  const agg = cell(tr, "", "name");
  agg.appendChild(breakable(`${r.aggregateType} ${r.aggregateId}`));
  const sub = document.createElement("div");
  sub.className = "sub";
  sub.appendChild(breakable(r.subscription));
  agg.appendChild(sub);
  const at = cell(tr, stoppedAt(r));
  const held = document.createElement("div");
  held.className = "held";
  at.appendChild(held);
  const err = cell(tr, r.error.message, "error");
  if (r.error.code || r.error.module) {
    const c = document.createElement("div");
    c.className = "code";
    c.textContent = [r.error.code && `code ${r.error.code}`, r.error.module && `in ${r.error.module}`].filter(Boolean).join(" · ");
    err.appendChild(c);
  }
  if (r.error.classes && r.error.classes.length) {
    const c = document.createElement("div");
    c.className = "classes";
    c.textContent = r.error.classes.join(" ‹ ") + (r.error.kind ? ` · ${r.error.kind}` : "") +
      (r.error.undeclared && r.error.undeclared.length ? ` · undeclared: ${r.error.undeclared.join(", ")}` : "");
    err.appendChild(c);
  }
  const detail = document.createElement("div");
  detail.className = "detail";
  err.appendChild(history(r, key, detail));
  detailOf(r, key, sig).then(rec => {
    const ev = rec.event ? `${rec.event.type} ${JSON.stringify(rec.event.data)}` : "(no longer in the log)";
    detail.textContent = `stopped at: ${ev}`;
    held.textContent = rec.heldCommits ? `holds back ${plural(rec.heldCommits, "later commit")}` : "holds back nothing later";
    if (rec.capsule) err.appendChild(capsuleLink(r, rec.capsule));
  }, e => { detail.textContent = `details unavailable: ${describe(e)}`; });
  cell(tr, String(r.attempts) + (r.parkedRetries ? ` (+${r.parkedRetries} later)` : ""));
  const state = cell(tr, r.state, "state-" + r.state);
  const next = document.createElement("div");
  next.className = "next-retry";
  next.textContent = r.state === "retrying" ? `next retry ${when(r.nextRetry)}` : r.state === "waiting" ? awaiting(r.waitReason) : "";
  state.appendChild(next);
  const actionTd = cell(tr, "", "act");
  const reason = document.createElement("input");
  reason.className = "reason";
  reason.placeholder = "why (recorded)";
  reason.value = reasons.get(key) || "";
  reason.addEventListener("input", () => reasons.set(key, reason.value));
  actionTd.appendChild(reason);
  const actions = document.createElement("div");
  actions.className = "actions";
  actionTd.appendChild(actions);
  for (const action of ["resume", "skip"]) {
    const b = document.createElement("button");
    b.textContent = action === "resume" ? "Resume" : "Skip";
    b.className = `${action} action`;
    b.disabled = connection !== "ok";
    b.addEventListener("click", async () => {
      const body = { reason: reason.value };
      const name = `${r.aggregateType} ${r.aggregateId}`;
      b.disabled = true;
      try {
        if (action === "skip") {
          const d = await detailOf(r, key, sig);
          const through = throughVersion(r, d);
          const span = through > r.version ? `versions ${r.version} through ${through}` : `version ${r.version}`;
          if (!confirm(`Skip ${name}: ${span} (${plural(through - r.version + 1, "commit")}) will not be handled. Events appended later are not skipped.`)) return;
          body.throughVersion = through;
        }
        await api("POST", recordPath(r, action), body);
        reasons.delete(key);
        if (action === "resume") resumed.set(key, { lastFailure: r.lastFailure, at: Date.now() });
        setStatus(`${action === "resume" ? "Resumed" : "Skipped"} ${name}`);
      } catch (e) {
        setStatus(`${action} of ${name} failed: ${describe(e)}`, true);
      } finally {
        b.disabled = connection !== "ok";
      }
      refresh();
    });
    actions.appendChild(b);
  }
  return tr;
}

// failedAgain tells the operator when an aggregate they resumed from this
// page parked again: its record shows a failure other than the one it had
// when they resumed it (the host's times only, so the browser's clock does
// not matter).
function failedAgain(r, key) {
  const was = resumed.get(key);
  if (was === undefined) return;
  if (r.state !== "resuming" && r.lastFailure !== was.lastFailure) {
    resumed.delete(key);
    setStatus(`${r.aggregateType} ${r.aggregateId} was resumed but failed again: ${r.error.message}`, true);
    rows.get(key)?.tr.classList.add("failed-again");
  }
}

function renderParked(records) {
  const body = document.querySelector("#parked tbody");
  const empty = document.getElementById("parked-empty");
  empty.hidden = records.length > 0;
  // A broad filter is answered by a bounded walk of the index: a page
  // may hold no match yet while the next one goes on.
  empty.textContent = nextCursor ? "No match among the records looked at so far: the next page goes on." : "Nothing is parked.";
  const seen = new Set();
  let prev = null;
  for (const r of records) {
    const key = rowKey(r);
    seen.add(key);
    // The relative "in 3m" of the next retry is refreshed in place; any
    // other change rebuilds the row.
    const sig = JSON.stringify([r.version, r.index, r.error, r.attempts, r.parkedRetries, r.state, r.nextRetry, r.waitReason, (r.history || []).length]);
    let row = rows.get(key);
    if (!row || row.sig !== sig) {
      const tr = parkedRow(r, key, sig);
      if (row) row.tr.replaceWith(tr);
      row = { sig, tr };
      rows.set(key, row);
    } else if (r.state === "retrying") {
      row.tr.querySelector(".next-retry").textContent = `next retry ${when(r.nextRetry)}`;
    }
    const want = prev ? prev.nextSibling : body.firstChild;
    if (want !== row.tr) body.insertBefore(row.tr, want);
    prev = row.tr;
    failedAgain(r, key);
  }
  for (const [key, row] of rows) {
    if (!seen.has(key)) { row.tr.remove(); rows.delete(key); reasons.delete(key); details.delete(key); }
  }
  // A resume that has not failed again within a minute went through.
  for (const [key, was] of resumed) if (Date.now() - was.at > 60000 && !seen.has(key)) resumed.delete(key);
}

// subAction runs pause, unpause or reset on a subscription.
async function subAction(s, action, button) {
  let body;
  if (action === "pause") {
    const answer = prompt(`Pause ${s.name}: for how many minutes? Leave it empty to pause until you unpause it.`, "");
    if (answer === null) return;
    if (answer.trim() !== "") {
      const minutes = Number(answer.trim());
      if (!(minutes > 0)) { setStatus(`pause of ${s.name}: “${answer}” is not a number of minutes`, true); return; }
      body = { until: new Date(Date.now() + minutes * 60000).toISOString() };
    }
  }
  if (action === "reset") {
    const answer = prompt(`Reset ${s.name}: deliver again from which position? 1 replays everything from the beginning; ${s.head + 1} (the head + 1) skips to the end. The checkpoint is ${s.checkpoint}.`, "1");
    if (answer === null) return;
    const position = Number(answer.trim());
    if (!Number.isInteger(position) || position < 1) { setStatus(`reset of ${s.name}: “${answer}” is not a position (a whole number from 1)`, true); return; }
    if (!confirm(`Reset ${s.name} to position ${position}? Every commit from there on is delivered again.`)) return;
    body = { position };
  }
  button.disabled = true;
  try {
    await api("POST", subPath(s.name, action), body);
    setStatus(`${{ pause: "Paused", unpause: "Unpaused", reset: "Reset" }[action]} ${s.name}`);
  } catch (e) {
    setStatus(`${action} of ${s.name} failed: ${describe(e)}`, true);
  } finally {
    button.disabled = connection !== "ok";
  }
  refresh();
}

function renderSubs(subs) {
  const body = document.querySelector("#subs tbody");
  body.replaceChildren();
  document.getElementById("subs-empty").hidden = subs.length > 0;
  for (const s of subs) {
    const tr = document.createElement("tr");
    tr.dataset.name = s.name;
    cell(tr, "", "name").appendChild(breakable(s.name));
    cell(tr, "", "name").appendChild(breakable(s.module || "—"));
    const outage = (s.partitions || []).filter(p => p.state === "systemic-paused");
    const state = cell(tr, s.state + (s.pausedUntil ? ` until ${new Date(s.pausedUntil).toLocaleTimeString()}` : ""), "state-" + s.state);
    if (outage.length) {
      const o = document.createElement("div");
      o.className = "outage";
      o.textContent = `${plural(outage.length, "partition")} paused: ${outage[0].pauseReason || "outage"}`;
      state.appendChild(o);
    }
    // The checkpoint is the next position to deliver; on an empty log (head
    // 0) nothing has been delivered yet.
    // unread: an outage of the log or the ledger; head and lag not known.
    if (s.unread) {
      cell(tr, `next to deliver: ${s.checkpoint} (head not known: ${s.unread})`, "unread");
      cell(tr, "not known");
    } else {
      cell(tr, s.head === 0 ? "— (the log is empty)" : s.lag === 0 ? `all ${s.head} delivered` : `next to deliver: ${s.checkpoint} (head ${s.head})`);
      cell(tr, s.lag === 0 ? "caught up" : plural(s.lag, "commit") + " behind");
    }
    const parked = s.parked || {};
    cell(tr, Object.entries(parked).map(([k, v]) => `${v} ${k}`).join(", ") || "none");
    const actions = cell(tr, "", "actions");
    const toggle = s.state === "paused" ? "unpause" : "pause";
    for (const action of [toggle, "reset"]) {
      const b = document.createElement("button");
      b.textContent = { pause: "Pause", unpause: "Unpause", reset: "Reset…" }[action];
      b.className = `${action} action`;
      b.disabled = connection !== "ok";
      b.addEventListener("click", () => subAction(s, action, b));
      actions.appendChild(b);
    }
    body.appendChild(tr);
  }
  const select = document.getElementById("f-sub");
  const names = subs.map(s => s.name);
  const have = [...select.options].slice(1).map(o => o.value);
  if (JSON.stringify(names) !== JSON.stringify(have)) {
    const chosen = select.value;
    select.replaceChildren(new Option("all", ""), ...names.map(n => new Option(n, n)));
    select.value = names.includes(chosen) ? chosen : "";
  }
}

// An action's message stays up for a while; the routine "updated" line
// does not overwrite it.
let holdStatusUntil = 0;

function setStatus(text, isError, routine) {
  if (routine && Date.now() < holdStatusUntil) return;
  if (!routine) holdStatusUntil = Date.now() + 10000;
  const el = document.getElementById("status");
  el.textContent = text;
  el.classList.toggle("error", !!isError);
}

// connection is "ok", "unauthorized" or "unreachable". While it is not ok,
// the banner says why, the tables are marked stale and every action button
// is off: the rows are what the host last answered, not what it has now.
let connection = "ok";
let lostSince = null;

function setConnection(state, why) {
  if (state !== "ok" && connection === "ok") lostSince = new Date();
  connection = state;
  const banner = document.getElementById("banner");
  banner.hidden = state === "ok";
  banner.className = state;
  if (state === "unauthorized") {
    banner.textContent = "Sign in with a token: this host needs one. Paste it in Token above.";
    tokenInput.classList.add("needed");
  } else if (state === "unreachable") {
    banner.textContent = `Host unreachable since ${lostSince.toLocaleTimeString()} (${why}). ` +
      "The tables show what it last answered; actions are off until it answers again.";
  }
  if (state !== "unauthorized") tokenInput.classList.remove("needed");
  document.body.classList.toggle("stale", state !== "ok");
  for (const b of document.querySelectorAll("button.action")) b.disabled = state !== "ok";
}

// Paging: the cursors of the pages before the one shown.
const cursors = [""];
let nextCursor = "";

function parkedQuery() {
  const q = new URLSearchParams();
  const sub = document.getElementById("f-sub").value;
  const state = document.getElementById("f-state").value;
  const type = document.getElementById("f-type").value.trim();
  if (sub) q.set("subscription", sub);
  if (state) q.set("state", state);
  if (type) q.set("aggregateType", type);
  for (const [id, name] of [["f-class", "class"], ["f-message", "message"], ["f-group", "group"]]) {
    const v = document.getElementById(id).value.trim();
    if (v) q.set(name, v);
  }
  // datetime-local is the browser's local time; the API takes RFC 3339.
  for (const [id, name] of [["f-after", "failedAfter"], ["f-before", "failedBefore"]]) {
    const v = document.getElementById(id).value;
    if (v) q.set(name, new Date(v).toISOString());
  }
  q.set("limit", document.getElementById("f-limit").value);
  const after = cursors[cursors.length - 1];
  if (after) q.set("after", after);
  return "/v1/parked?" + q.toString();
}

function renderPager() {
  document.getElementById("page").textContent = `page ${cursors.length}`;
  document.getElementById("prev-page").disabled = cursors.length === 1;
  document.getElementById("next-page").disabled = !nextCursor;
}

document.getElementById("next-page").addEventListener("click", () => { if (nextCursor) { cursors.push(nextCursor); refresh(); } });
document.getElementById("prev-page").addEventListener("click", () => { if (cursors.length > 1) { cursors.pop(); refresh(); } });
document.getElementById("filters").addEventListener("submit", e => e.preventDefault());
for (const id of ["f-sub", "f-state", "f-type", "f-class", "f-message", "f-after", "f-before", "f-limit"]) {
  document.getElementById(id).addEventListener("change", () => { cursors.length = 1; refresh(); });
}

// refreshers are the sections fetched on their own (cluster.js), each
// called at every refresh and not waited for.
const refreshers = [];

let busy = false, again = false;
async function refresh() {
  if (busy) { again = true; return; }
  busy = true;
  for (const f of refreshers) f();
  try {
    // The parked list's own refusal (a filter naming a class nobody
    // declares: 400) empties it and says why; the rest still renders.
    const [parked, subs, jobs] = await Promise.all([api("GET", parkedQuery()).catch(e => e), api("GET", "/v1/subscriptions"), api("GET", "/v1/jobs?limit=20")]);
    const refused = parked instanceof ApiError && parked.status === 400 && cursors.length <= 1;
    if (parked instanceof Error && !refused) throw parked;
    setConnection("ok");
    renderJobs(jobs.jobs || []);
    nextCursor = refused ? "" : parked.next || "";
    renderParked(refused ? [] : parked.records || []);
    if (refused) document.getElementById("parked-empty").textContent = `The filter was refused: ${parked.message}`;
    renderSubs(subs.subscriptions || []);
    renderPager();
    setStatus(`updated ${new Date().toLocaleTimeString()}`, false, true);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) setConnection("unauthorized");
    else if (e instanceof Unreachable || (e instanceof ApiError && e.status >= 502)) setConnection("unreachable", describe(e));
    else if (e instanceof ApiError && e.status === 400 && cursors.length > 1) { cursors.length = 1; again = true; } // a stale cursor
    else setStatus(`the host refused the refresh: ${describe(e)}`, true, true);
  } finally {
    busy = false;
    if (again) { again = false; refresh(); }
  }
}

refresh();
setInterval(refresh, 2000);

// Bulk jobs: the filters above, as a job's filter.
function jobFilter() {
  const f = {};
  const sub = document.getElementById("f-sub").value;
  if (sub) f.subscriptions = [sub];
  for (const [id, key] of [["f-state", "state"], ["f-type", "aggregateType"], ["f-class", "class"], ["f-message", "message"], ["f-group", "group"]]) {
    const v = document.getElementById(id).value.trim();
    if (v) f[key] = v;
  }
  for (const [id, key] of [["f-after", "failedAfter"], ["f-before", "failedBefore"]]) {
    const v = document.getElementById(id).value;
    if (v) f[key] = new Date(v).toISOString();
  }
  return f;
}

function describeFilter(f) {
  const parts = [];
  if (f.subscriptions) parts.push(`subscription ${f.subscriptions.join(", ")}`);
  if (f.state) parts.push(`state ${f.state}`);
  if (f.aggregateType) parts.push(`type ${f.aggregateType}`);
  if (f.class) parts.push(`class ${f.class}`);
  if (f.message) parts.push(`message “${f.message}”`);
  if (f.failedAfter) parts.push(`first failed after ${new Date(f.failedAfter).toLocaleString()}`);
  if (f.failedBefore) parts.push(`first failed before ${new Date(f.failedBefore).toLocaleString()}`);
  return parts.join(", ") || "everything parked";
}

// bulk asks the host what a job would act on (a dry run), says the count in
// its confirmation, asks why, and creates the job.
async function bulk(action, button) {
  const filter = jobFilter();
  button.disabled = true;
  try {
    const dry = await api("POST", "/v1/jobs", { action, filter, dryRun: true });
    if (dry.matched === 0) { setStatus(`nothing parked matches ${describeFilter(filter)}`); return; }
    const verb = action === "resume" ? "Resume" : "Skip";
    const reason = prompt(`${verb} ${plural(dry.matched, "parked aggregate")} (${describeFilter(filter)})? ` +
      `Say why (it is kept in each aggregate's history):`, "");
    if (reason === null) return;
    if (!reason.trim()) { setStatus(`${action} of ${dry.matched}: a reason is needed`, true); return; }
    if (!confirm(`${verb} ${plural(dry.matched, "aggregate")}${action === "skip" ? ": their held events will not be handled" : ""}? ` +
      `The host works through them at its default rate.`)) return;
    const job = await api("POST", "/v1/jobs", { action, filter, reason: reason.trim() });
    setStatus(`Job ${job.id}: ${action} of ${plural(job.matched, "aggregate")} started`);
  } catch (e) {
    setStatus(`bulk ${action} failed: ${describe(e)}`, true);
  } finally {
    button.disabled = connection !== "ok";
  }
  refresh();
}

document.getElementById("bulk-resume").addEventListener("click", e => bulk("resume", e.target));
document.getElementById("bulk-skip").addEventListener("click", e => bulk("skip", e.target));

function renderJobs(jobs) {
  const body = document.querySelector("#jobs tbody");
  body.replaceChildren();
  document.getElementById("jobs-empty").hidden = jobs.length > 0;
  for (const j of jobs) { // newest first, as the API lists them
    const tr = document.createElement("tr");
    tr.dataset.id = String(j.id);
    cell(tr, `#${j.id} by ${j.actor}`, "name");
    cell(tr, `${j.action}: “${j.reason}”`);
    cell(tr, describeFilter(j.filter));
    const progress = cell(tr, `${j.done + j.gone + j.failed} of ${j.matched}` + (j.failed ? `, ${j.failed} failed` : "") +
      (j.gone ? `, ${j.gone} resolved meanwhile` : "") + ` · ${j.rate}/s`, "progress");
    if (j.failures && j.failures.length) {
      const f = document.createElement("div");
      f.className = "classes";
      f.textContent = j.failures.slice(0, 3).map(x => `${x.aggregateType} ${x.aggregateId}: ${x.error}`).join("; ");
      progress.appendChild(f);
    }
    cell(tr, j.state, "state-" + j.state);
    const actions = cell(tr, "", "actions");
    if (j.state === "running") {
      const b = document.createElement("button");
      b.textContent = "Cancel";
      b.className = "cancel action";
      b.disabled = connection !== "ok";
      b.addEventListener("click", async () => {
        if (!confirm(`Cancel job ${j.id}? What it did stays done.`)) return;
        b.disabled = true;
        try { await api("POST", `/v1/jobs/${j.id}/cancel`); setStatus(`Job ${j.id} cancelled`); }
        catch (e) { setStatus(`cancel of job ${j.id} failed: ${describe(e)}`, true); }
        refresh();
      });
      actions.appendChild(b);
    }
    body.appendChild(tr);
  }
}
