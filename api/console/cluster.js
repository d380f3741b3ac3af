// The console's Cluster section: the hosts of the deployment with their
// lease ages, and which host owns each partition (GET /v1/cluster). It is
// fetched beside the rest on every refresh, but on its own: NATS not
// answering (a 503 here) leaves the other sections as they are.
"use strict";

// goDuration reads a Go duration ("1.5s", "312ms", "2m3s") as milliseconds;
// NaN if it is none.
function goDuration(s) {
  const units = { h: 3600e3, m: 60e3, s: 1e3, ms: 1, us: 1e-3, "µs": 1e-3, ns: 1e-6 };
  let ms = 0, rest = String(s || "");
  if (rest === "0s") return 0;
  while (rest) {
    const m = /^(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/.exec(rest);
    if (!m) return NaN;
    ms += Number(m[1]) * units[m[2]];
    rest = rest.slice(m[0].length);
  }
  return ms;
}

// Subscriptions whose partition list is unfolded, kept across refreshes.
const openClusterSubs = new Set();

function clusterLine(c) {
  const line = document.getElementById("cluster-line");
  line.replaceChildren();
  line.classList.remove("error");
  if (c.mode === "single") {
    line.textContent = `Single host ${c.host}: it owns all ${c.partitions} partitions of every subscription (store.backend is not "jetstream").`;
    return;
  }
  line.append(`${plural(c.hosts.length, "host")} · lease TTL ${c.leaseTTL} · ${c.partitions} partitions per subscription · `);
  const owned = document.createElement("span");
  owned.className = c.unowned ? "unowned-count" : "all-owned";
  owned.textContent = c.unowned ? `${plural(c.unowned, "partition")} unowned` : "every partition owned";
  line.append(owned, ` · seen from ${c.host}`);
}

function renderClusterHosts(c) {
  const body = document.querySelector("#cluster-hosts tbody");
  body.replaceChildren();
  const ttl = goDuration(c.leaseTTL);
  for (const h of c.hosts) {
    const tr = document.createElement("tr");
    tr.dataset.host = h.id;
    if (h.self) tr.classList.add("self");
    cell(tr, "", "name").appendChild(breakable(h.id + (h.self ? " (this host)" : "")));
    cell(tr, "", "name").appendChild(breakable(h.address || "—"));
    cell(tr, h.version || "—");
    cell(tr, when(h.joined));
    // A lease renews every third of the TTL: older than two thirds means
    // renewals are failing, and at the TTL the host is gone.
    const age = goDuration(h.leaseAge);
    cell(tr, h.leaseAge ? `${h.leaseAge} ago` : "—", age > ttl * 2 / 3 ? "lease-late" : "");
    cell(tr, plural(h.owned, "partition"));
    body.appendChild(tr);
  }
}

// partitionChip is one partition in an unfolded subscription: its index
// and owner, marked when no live host owns it.
function partitionChip(p) {
  const chip = document.createElement("span");
  chip.className = "part" + (p.state === "owned" ? "" : " unowned");
  chip.dataset.index = String(p.index);
  chip.dataset.state = p.state;
  let text = `${p.index}: ${p.owner || "—"}`;
  if (p.state !== "owned") text += ` (${p.state})`;
  else if (p.assigned && p.assigned !== p.owner) text += ` → ${p.assigned}`;
  chip.textContent = text;
  chip.title = `partition ${p.index}: ${p.state}, epoch ${p.epoch}` + (p.assigned ? `, assigned to ${p.assigned}` : "");
  return chip;
}

function renderClusterSubs(c) {
  const ids = c.hosts.map(h => h.id);
  const head = document.querySelector("#cluster-subs thead tr");
  head.replaceChildren();
  for (const title of ["Subscription", ...ids, "Unowned"]) {
    const th = document.createElement("th");
    th.textContent = title;
    head.appendChild(th);
  }
  const body = document.querySelector("#cluster-subs tbody");
  body.replaceChildren();
  for (const s of c.subscriptions) {
    const tr = document.createElement("tr");
    tr.dataset.name = s.name;
    const name = cell(tr, "", "name");
    const d = document.createElement("details");
    d.open = openClusterSubs.has(s.name);
    d.addEventListener("toggle", () => { if (d.open) openClusterSubs.add(s.name); else openClusterSubs.delete(s.name); });
    const summary = document.createElement("summary");
    summary.appendChild(breakable(s.name));
    d.appendChild(summary);
    const grid = document.createElement("div");
    grid.className = "parts";
    for (const p of s.partitions) grid.appendChild(partitionChip(p));
    d.appendChild(grid);
    name.appendChild(d);
    for (const id of ids) {
      const n = s.partitions.filter(p => p.state === "owned" && p.owner === id).length;
      cell(tr, String(n), "count").dataset.host = id;
    }
    const unowned = cell(tr, s.unowned.length ? s.unowned.join(", ") : "none", "count unowned-list");
    if (s.unowned.length) unowned.classList.add("unowned");
    body.appendChild(tr);
  }
}

function renderCluster(c) {
  clusterLine(c);
  const detail = document.getElementById("cluster-detail");
  detail.hidden = c.mode === "single";
  if (c.mode === "single") return;
  renderClusterHosts(c);
  renderClusterSubs(c);
}

// A 503 is NATS not answering: said in the section, which keeps the last
// tables, greyed. Other failures are the main refresh's to report.
function clusterFailed(e) {
  const line = document.getElementById("cluster-line");
  const shown = !document.getElementById("cluster-detail").hidden;
  line.textContent = `The cluster's state is unavailable: ${describe(e)}.` + (shown ? " The tables below are what the host last answered." : "");
  line.classList.add("error");
}

let clusterBusy = false;
async function refreshCluster() {
  if (clusterBusy) return; // the next tick asks again
  clusterBusy = true;
  try {
    renderCluster(await api("GET", "/v1/cluster"));
    document.getElementById("cluster").classList.remove("stale-cluster");
  } catch (e) {
    clusterFailed(e);
    document.getElementById("cluster").classList.add("stale-cluster");
  } finally {
    clusterBusy = false;
  }
}

refreshers.push(refreshCluster);
refreshCluster();
