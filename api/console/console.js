// The ops console: polls the REST API and offers resume and skip.
"use strict";

const tokenInput = document.getElementById("token");
tokenInput.value = localStorage.getItem("berth-token") || "";
tokenInput.addEventListener("change", () => { localStorage.setItem("berth-token", tokenInput.value); refresh(); });

function headers() {
  const h = { "Accept": "application/json" };
  if (tokenInput.value) h["Authorization"] = "Bearer " + tokenInput.value;
  return h;
}

async function api(method, path, body) {
  const init = { method, headers: headers() };
  if (body !== undefined) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
  const res = await fetch(path, init);
  const text = await res.text();
  const data = text ? JSON.parse(text) : null;
  if (!res.ok) throw new Error((data && (data.detail || data.title)) || res.statusText);
  return data;
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

// recordPath is the REST path of a parked record (and of its actions):
// every segment is percent-encoded, so an id holding "/", "%", "?", "#" or
// spaces names its own aggregate and no other. ("." and ".." — which
// browsers would remove from a path even encoded — are refused at append.)
function recordPath(r, action) {
  const [sub, type, id] = [r.subscription, r.aggregateType, r.aggregateId].map(s => encodeURIComponent(s));
  return `/v1/subscriptions/${sub}/parked/${type}/${id}` + (action ? `/${action}` : "");
}

// rowKey names a record's row unambiguously (a type or id may hold "/").
function rowKey(r) { return JSON.stringify([r.subscription, r.aggregateType, r.aggregateId]); }

// Rows are kept across refreshes and rebuilt only when their record
// changed, so what an operator types, and the button they are about to
// click, survive the page's polling.
const reasons = new Map();
const rows = new Map(); // key -> {sig, tr}
const openHistory = new Set(); // keys whose history is unfolded

// history lists a record's attempts, park, retries and operator actions,
// oldest first (the ledger keeps the park first so it is never dropped).
function history(r, key) {
  const entries = [...(r.history || [])].sort((a, b) => new Date(a.time) - new Date(b.time));
  const d = document.createElement("details");
  d.className = "history";
  d.open = openHistory.has(key);
  const detail = document.createElement("div");
  detail.className = "detail";
  const loadDetail = async () => {
    try {
      const rec = await api("GET", recordPath(r));
      const ev = rec.event ? `${rec.event.type} ${JSON.stringify(rec.event.data)}` : "(no longer in the log)";
      detail.textContent = `stopped at: ${ev}; holds back ${rec.heldCommits} later commit${rec.heldCommits === 1 ? "" : "s"}`;
    } catch (e) {
      detail.textContent = `details unavailable: ${e.message}`;
    }
  };
  d.addEventListener("toggle", () => {
    if (d.open) { openHistory.add(key); loadDetail(); } else openHistory.delete(key);
  });
  const summary = document.createElement("summary");
  summary.textContent = `history (${entries.length})`;
  d.appendChild(summary);
  const ol = document.createElement("ol");
  for (const e of entries) {
    const li = document.createElement("li");
    let text = `${new Date(e.time).toLocaleTimeString()} ${e.action}`;
    if (e.attempt) text += ` #${e.attempt}`;
    if (e.version) text += ` v${e.version}`;
    if (e.actor) text += ` by ${e.actor}`;
    if (e.reason) text += `: “${e.reason}”`;
    if (e.error) text += ` — ${e.error.message}`;
    li.textContent = text;
    ol.appendChild(li);
  }
  d.appendChild(detail);
  d.appendChild(ol);
  if (d.open) loadDetail();
  return d;
}

// awaiting says why a waiting aggregate has no next retry.
function awaiting(why) {
  switch (why) {
    case "unrecoverable": return "none: awaiting operator (unrecoverable)";
    case "no-retries": return "none: awaiting operator (no long-horizon retries)";
    default: return "none: awaiting operator (retries spent)";
  }
}

function parkedRow(r, key) {
  const tr = document.createElement("tr");
  tr.dataset.key = `${r.subscription}/${r.aggregateType}/${r.aggregateId}`; // for people; may be ambiguous
  tr.dataset.subscription = r.subscription;
  tr.dataset.type = r.aggregateType;
  tr.dataset.id = r.aggregateId;
  cell(tr, r.subscription);
  cell(tr, `${r.aggregateType} ${r.aggregateId}`);
  cell(tr, `v${r.version} #${r.index}`);
  const err = cell(tr, r.error.message, "error");
  if (r.error.classes && r.error.classes.length) {
    const c = document.createElement("div");
    c.className = "classes";
    c.textContent = r.error.classes.join(" ‹ ") + (r.error.kind ? ` · ${r.error.kind}` : "") +
      (r.error.undeclared && r.error.undeclared.length ? ` · undeclared: ${r.error.undeclared.join(", ")}` : "");
    err.appendChild(c);
  }
  err.appendChild(history(r, key));
  cell(tr, String(r.attempts + (r.parkedRetries ? ` (+${r.parkedRetries} later)` : "")));
  cell(tr, r.state, "state-" + r.state);
  cell(tr, r.state === "retrying" ? when(r.nextRetry) : r.state === "waiting" ? awaiting(r.waitReason) : "—", "next-retry");
  const reasonTd = cell(tr, "");
  const reason = document.createElement("input");
  reason.className = "reason";
  reason.placeholder = "why (recorded)";
  reason.value = reasons.get(key) || "";
  reason.addEventListener("input", () => reasons.set(key, reason.value));
  reasonTd.appendChild(reason);
  const actions = cell(tr, "");
  for (const action of ["resume", "skip"]) {
    const b = document.createElement("button");
    b.textContent = action === "resume" ? "Resume" : "Skip";
    b.className = action;
    b.addEventListener("click", async () => {
      if (action === "skip" && !confirm(`Skip the events ${r.aggregateType} ${r.aggregateId} holds back? They will not be handled.`)) return;
      b.disabled = true;
      try {
        await api("POST", recordPath(r, action), { reason: reason.value });
        reasons.delete(key);
        setStatus(`${action === "resume" ? "Resumed" : "Skipped"} ${r.aggregateType} ${r.aggregateId}`);
      } catch (e) {
        setStatus(`${action} failed: ${e.message}`, true);
      }
      refresh();
    });
    actions.appendChild(b);
  }
  return tr;
}

function renderParked(records) {
  const body = document.querySelector("#parked tbody");
  document.getElementById("parked-empty").hidden = records.length > 0;
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
      const tr = parkedRow(r, key);
      if (row) row.tr.replaceWith(tr);
      row = { sig, tr };
      rows.set(key, row);
    } else if (r.state === "retrying") {
      row.tr.querySelector(".next-retry").textContent = when(r.nextRetry);
    }
    const want = prev ? prev.nextSibling : body.firstChild;
    if (want !== row.tr) body.insertBefore(row.tr, want);
    prev = row.tr;
  }
  for (const [key, row] of rows) {
    if (!seen.has(key)) { row.tr.remove(); rows.delete(key); reasons.delete(key); }
  }
}

function renderSubs(subs) {
  const body = document.querySelector("#subs tbody");
  body.replaceChildren();
  document.getElementById("subs-empty").hidden = subs.length > 0;
  for (const s of subs) {
    const tr = document.createElement("tr");
    tr.dataset.name = s.name;
    cell(tr, s.name);
    cell(tr, s.module || "");
    const outage = (s.partitions || []).filter(p => p.state === "systemic-paused");
    const state = cell(tr, s.state, "state-" + s.state);
    if (outage.length) {
      const o = document.createElement("div");
      o.className = "outage";
      o.textContent = `${outage.length} partition${outage.length > 1 ? "s" : ""} paused: ${outage[0].pauseReason || "outage"}`;
      state.appendChild(o);
    }
    cell(tr, String(s.checkpoint));
    cell(tr, String(s.lag));
    const parked = s.parked || {};
    cell(tr, Object.entries(parked).map(([k, v]) => `${v} ${k}`).join(", ") || "0");
    body.appendChild(tr);
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

let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const [parked, subs] = await Promise.all([api("GET", "/v1/parked?limit=500"), api("GET", "/v1/subscriptions")]);
    renderParked(parked.records || []);
    renderSubs(subs.subscriptions || []);
    setStatus(`updated ${new Date().toLocaleTimeString()}`, false, true);
  } catch (e) {
    setStatus(`cannot reach the host: ${e.message}`, true, true);
  } finally {
    busy = false;
  }
}

refresh();
setInterval(refresh, 2000);
