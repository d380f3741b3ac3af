// Failure groups (GET /v1/parked/groups): the parked aggregates by cause,
// biggest first, for the subscription chosen in the filters; "Records ›"
// lists one group's records in the table below it (the group= filter).
"use strict";

function groupRow(g) {
  const tr = document.createElement("tr");
  tr.dataset.group = g.group;
  cell(tr, String(g.count), "count");
  const cause = cell(tr, g.message, "cause");
  cause.title = `group ${g.group} of ${g.subscription}`;
  cell(tr, (g.classes || []).join(" < ") || "—");
  cell(tr, Object.entries(g.modules || {}).sort().map(([v, n]) => `${v} ×${n}`).join(", ") || "—");
  cell(tr, when(g.firstFailure));
  cell(tr, when(g.lastFailure));
  const td = cell(tr, "");
  const b = document.createElement("button");
  b.type = "button";
  b.className = "records";
  b.textContent = "Records ›";
  b.addEventListener("click", () => showGroup(g.group));
  td.appendChild(b);
  return tr;
}

function renderGroups(groups) {
  const body = document.querySelector("#groups-table tbody");
  body.replaceChildren(...groups.map(groupRow));
  document.getElementById("groups-empty").hidden = groups.length > 0;
}

// showGroup lists the records of group ("" for every group's) below.
function showGroup(group) {
  document.getElementById("f-group").value = group;
  document.getElementById("f-group-label").hidden = !group;
  cursors.length = 1;
  refresh();
  if (group) document.getElementById("parked").scrollIntoView();
}

async function refreshGroups() {
  const q = new URLSearchParams({ limit: "50" });
  const sub = document.getElementById("f-sub").value;
  if (sub) q.set("subscription", sub);
  try {
    renderGroups((await api("GET", "/v1/parked/groups?" + q.toString())).groups || []);
  } catch (e) {
    // The refresh of the page says whether the host answers.
  }
}

document.getElementById("f-group-clear").addEventListener("click", () => showGroup(""));
refreshers.push(refreshGroups);
refreshGroups();
