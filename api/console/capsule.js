// The ops console's attempt capsules: a parked record whose failed
// attempt was recorded offers its capsule for download, and the command
// that replays it (docs/failure-model.md, Attempt capsules). It runs on
// console.js's send, headers, describe and setStatus.
"use strict";

// downloadCapsule saves the capsule of a parked record's failed attempt
// (the host answers it to the token, so the browser cannot fetch it by a
// plain link) under the file name the host gives it.
async function downloadCapsule(path) {
  const h = headers();
  h["Accept"] = "application/vnd.berth.capsule+json";
  const { res, blob } = await send("GET", path, { headers: h }, true);
  const named = /filename="([^"]+)"/.exec(res.headers.get("Content-Disposition") || "");
  const a = document.createElement("a");
  a.href = URL.createObjectURL(blob);
  a.download = named ? named[1] : "capsule.json";
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 60000);
}

// shellWord quotes s for a POSIX shell when it needs quoting.
function shellWord(s) { return /^[A-Za-z0-9._\/:@=+-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'"; }

// capsuleLink offers the capsule of a record's failed attempt and says how
// to replay it on one's own machine.
function capsuleLink(r, path) {
  const div = document.createElement("div");
  div.className = "capsule";
  const a = document.createElement("a");
  a.href = path;
  a.className = "download-capsule";
  a.textContent = "Download capsule";
  a.addEventListener("click", async ev => {
    ev.preventDefault();
    try {
      await downloadCapsule(path);
      setStatus(`Downloaded the capsule of ${r.aggregateType} ${r.aggregateId}`);
    } catch (e) {
      setStatus(`download of the capsule of ${r.aggregateType} ${r.aggregateId} failed: ${describe(e)}`, true);
    }
  });
  div.appendChild(a);
  const hint = document.createElement("div");
  hint.className = "replay-hint";
  hint.textContent = "replay with: berth parked replay " + [r.subscription, r.aggregateType, r.aggregateId].map(shellWord).join(" ");
  div.appendChild(hint);
  return div;
}
