// One attempt: five videos under one scrubber, joints + events on the same timeline, scoring.
"use strict";
const attemptId = decodeURIComponent(location.pathname.split("/").pop());
const params = new URLSearchParams(location.search);
const blind = params.get("blind") === "1";
let data = null, fps = 30, videos = [], playing = false;
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"];

// the attempt list's filters the rater came from: "save and next unscored" stays within them
const VIEW = Object.fromEntries(["task", "condition", "alias"].filter(k => params.get(k)).map(k => [k, params.get(k)]));

function q(extra) {
  const p = new URLSearchParams({ rater: $("#rater").value || params.get("rater") || "", ...VIEW });
  if (blind) p.set("blind", "1");
  for (const [k, v] of Object.entries(extra || {})) p.set(k, v);
  return p.toString();
}

// ---- synchronised playback: the first video is the clock; the others follow it ----------------
// Times on the page are the episode's own (0 = its first frame). A native episode's video is its own
// file; an imported one (LeRobotDataset v3) is a span of a file shared by several episodes, from
// data-offset to data-end seconds: every read and write of currentTime goes through the offset.
function offsetOf(v) { return Number(v.dataset.offset || 0); }
function spanOf(v) { return (v.dataset.end ? Number(v.dataset.end) : v.duration) - offsetOf(v); }
function localTime(v) { return v.currentTime - offsetOf(v); }
// the last instant of a span shows its last frame: the next episode's first frame starts at data-end
function lastOf(v) { return v.dataset.end ? spanOf(v) - 0.5 / fps : spanOf(v); }
function place(v, t) {
  const last = lastOf(v);
  v.currentTime = offsetOf(v) + Math.max(0, Math.min(t, Number.isFinite(last) ? last : t));
}

function duration() {
  const ds = videos.map(spanOf).filter(d => Number.isFinite(d));
  return ds.length ? Math.max(...ds) : (data.episode ? data.episode.duration_s : 0);
}

function seek(t) {
  t = Math.max(0, Math.min(t, duration()));
  for (const v of videos) place(v, t);
  $("#scrubber").value = t;
  showTime(t);
}

function showTime(t) {
  $("#time").textContent = `${Number(t).toFixed(3)} s · frame ${Math.round(t * fps)}`;
  drawTimeline(t);
}

function setPlaying(on) {
  playing = on && videos.length > 0;
  $("#play").textContent = playing ? "Pause" : "Play";
  const rate = Number($("#speed").value);
  if (playing && localTime(videos[0]) >= duration() - 1 / fps) seek(0);   // at the end: play from the start
  for (const v of videos) { v.playbackRate = rate; if (playing) v.play().catch(() => {}); else v.pause(); }
  if (playing) requestAnimationFrame(tick);
  else if (videos.length) seek(localTime(videos[0]));
}

function tick() {
  if (!playing) return;
  const master = localTime(videos[0]);
  for (const v of videos.slice(1)) if (Math.abs(localTime(v) - master) > 1 / fps) place(v, master);
  for (const v of videos) if (!v.paused && localTime(v) >= lastOf(v)) v.pause();   // never into the next episode
  $("#scrubber").value = master;
  showTime(master);
  if (videos.every(v => v.ended || v.paused) || master >= duration()) { setPlaying(false); return; }
  requestAnimationFrame(tick);
}

function step(n) { setPlaying(false); seek(Number($("#scrubber").value) + n / fps); }

// ---- timeline: joints and events ------------------------------------------------------------
function drawTimeline(t) {
  const cv = $("#timeline"), g = cv.getContext("2d");
  g.clearRect(0, 0, cv.width, cv.height);
  const ep = data && data.episode;
  if (!ep || !ep.t.length) return;
  const T = Math.max(duration(), ep.t[ep.t.length - 1] || 1), pad = 30, W = cv.width - 2 * pad, H = cv.height - 40;
  const x = s => pad + (s / T) * W;
  ep.joints.forEach((name, j) => {
    const vals = ep.state.map(r => r[j]).filter(v => v !== null);
    if (!vals.length) return;
    const lo = Math.min(...vals), hi = Math.max(...vals), span = hi - lo || 1;
    g.strokeStyle = COLORS[j % COLORS.length]; g.lineWidth = 1.5; g.beginPath();
    ep.state.forEach((r, i) => { if (r[j] === null) return; const y = 10 + H - ((r[j] - lo) / span) * H; i ? g.lineTo(x(ep.t[i]), y) : g.moveTo(x(ep.t[i]), y); });
    g.stroke();
    g.fillStyle = COLORS[j % COLORS.length]; g.font = "12px system-ui"; g.fillText(name, pad + 4 + j * 110, cv.height - 6);
  });
  g.fillStyle = "#b3261e";
  for (const e of ep.events) if (typeof e.t === "number" && e.t >= 0) { g.fillRect(x(e.t) - 1, 0, 2, 10); }
  g.strokeStyle = "#000"; g.lineWidth = 2; g.beginPath(); g.moveTo(x(t), 0); g.lineTo(x(t), cv.height - 20); g.stroke();
}

// ---- page --------------------------------------------------------------------------------------
function renderScores() {
  const own = data.scores.find(s => s.rater === $("#rater").value);
  $("#current").textContent = data.scores.length ?
    "Current: " + data.scores.map(s => `${s.rater}: ${scoreText(s)}${s.note ? " — " + s.note : ""}`).join("; ") :
    (blind ? "You have not scored this attempt yet." : "Not scored yet.");
  $("#reason-box").hidden = !own;
  $("#save").textContent = own ? "Save rescore" : "Save score";
  $("#save").dataset.version = data.version;   // the version of this rater's scores the save is based on
  $("#history").replaceChildren(...data.history.map(h => el("tr", {},
    el("td", { text: h.rater }), el("td", { text: scoreText(h) }), el("td", { text: h.note || "" }),
    el("td", { text: h.scored_at || "" }), el("td", { text: h.reason || "" }), el("td", { text: h.superseded_at || "" }))));
}

function render() {
  const tr = data.trial, ep = data.episode;
  $("#attempt-id").textContent = data.attempt_id;
  $("#blind-banner").hidden = !blind;
  $("#alias").textContent = tr.alias;
  $("#task").textContent = `${tr.task} / ${tr.condition} (scene ${tr.scene_id}, evaluation ${tr.evaluation_id})`;
  $("#instruction").textContent = `“${tr.instruction}”`;
  const how = data.blind ? "hidden in second-rater mode (judge from the recording)" : `${data.stop_reason || "?"}`;
  $("#stop").textContent = how + (data.invalid_reason ? ` — INVALID: ${data.invalid_reason}` : " (valid)") +
    (ep ? ` after ${ep.duration_s} s, ${ep.steps} steps` : "");
  const al = data.scene_alignment;
  $("#alignment").textContent = !al ? "not recorded" : (al.reference ?
    Object.entries(al.scores).map(([c, v]) => `${c} ${Number(v).toFixed(3)}`).join(" · ") + ` (threshold ${al.threshold}; ${al.matched ? "matched" : "below threshold"})` :
    "no reference (first attempt of this evaluation)");
  const over = (data.alignment || {}).override_reason;
  if (over) $("#alignment").textContent += ` — started below the threshold; override reason: ${over}`;
  $("#alignment").classList.toggle("bad", !!over);
  $("#checklist").replaceChildren(...data.checklist.map(l => el("li", { text: l })));
  // episode events (clamps summarised: there can be hundreds), then the ledger's audit events
  const evs = ep ? ep.events : [];
  const clamps = evs.filter(e => e.kind === "clamp");
  const items = evs.filter(e => e.kind !== "clamp").map(e => el("li", { text: `${Number(e.t).toFixed(2)} s  ${e.kind}` +
    (e.request ? `: ${e.request}` : "") + (e.source ? ` (${e.source})` : "") + (e.invalid_reason ? ` — ${e.invalid_reason}` : "") }));
  if (clamps.length) items.push(el("li", { text: `${clamps.length} clamp(s) by the safety envelope, ` +
    `${Number(clamps[0].t).toFixed(2)}–${Number(clamps[clamps.length - 1].t).toFixed(2)} s (ticks on the timeline)` }));
  $("#events").replaceChildren(...items, ...data.ledger_events.map(e => el("li", { text: `ledger: ${e.kind} at ${e.t.slice(11, 19)}` })));
  // videos
  const box = $("#videos");
  box.replaceChildren();
  videos = [];
  if (ep) {
    fps = ep.fps || 30;
    $("#scrubber").step = String(1 / fps);
    for (const cam of ep.cameras) {
      const span = ep.videos[cam] || {};
      const v = el("video", { muted: true, preload: "auto", playsinline: true, "data-camera": cam,
                              "data-offset": String(span.offset_s || 0), "data-end": span.end_s == null ? "" : String(span.end_s),
                              src: `/media/${data.attempt_id}/video/${cam}.mp4` });
      v.muted = true;
      v.addEventListener("loadedmetadata", () => {
        place(v, Number($("#scrubber").value));   // an imported episode starts at its own offset in the file
        $("#scrubber").max = duration(); drawTimeline(Number($("#scrubber").value));
      });
      videos.push(v);
      box.append(el("div", { class: "cam" }, el("div", { class: "name", text: cam }), v,
        ep.videos[cam] && !ep.videos[cam].available ? el("div", { class: "bad", text: "video not available yet" }) : null));
    }
  }
  // first / last frames beside the reference
  const frames = $("#frames");
  const still = ep && !ep.cameras.includes("overhead") ? ep.cameras.slice(0, 2) : ["overhead", "middle"];  // imported: its own
  frames.replaceChildren(el("div", { class: "frames" }, ...still.map(cam => [
    el("figure", {}, el("img", { alt: `first ${cam}`, src: `/media/${data.attempt_id}/frame/first/${cam}.jpg` }), el("figcaption", { text: `${cam}: first frame` })),
    el("figure", {}, el("img", { alt: `last ${cam}`, src: `/media/${data.attempt_id}/frame/last/${cam}.jpg` }), el("figcaption", { text: `${cam}: last frame` })),
    el("figure", {}, data.references[cam] ? el("img", { alt: `reference ${cam}`, src: `/media/${data.attempt_id}/reference/${cam}.png` })
      : el("p", { class: "muted", text: "no reference yet" }), el("figcaption", { text: `${cam}: reference (same evaluation)` }))])));
  // score form (a mode's definition is its label's tooltip: the column stays short)
  const modes = $("#modes");
  modes.replaceChildren(el("legend", { text: "Failure mode" }), ...tr.failure_modes.map(m => {
    const choice = modeChoice(m);
    if (m.applicable) choice.title = m.definition;
    return choice;
  }));
  $("#scoring").hidden = data.status !== "complete";
  $("#prefill").hidden = !data.prefill;
  if (data.prefill) {
    $("#prefill").textContent = `Motion pre-fill (${tr.condition}): ${data.prefill.success ? "success" : "failure"}` +
      (data.prefill.failure_mode ? ` — ${data.prefill.failure_mode}` : "");
  }
  renderScores();
  // new videos start at 0: the scrubber, the time and the timeline say so too
  $("#scrubber").value = 0;
  showTime(0);
}

async function load() {
  try { data = await api(`/api/attempts/${encodeURIComponent(attemptId)}?${q()}`); render(); }
  catch (e) { $("#error").textContent = e.message; }
}

// After a save or a refused save: the scores, the history and the version again, the recording
// (and the rater's place in it) untouched.
async function refreshScores() {
  const fresh = await api(`/api/attempts/${encodeURIComponent(attemptId)}?${q()}`);
  for (const k of ["scores", "history", "version", "ledger_events"]) data[k] = fresh[k];
  renderScores();
}

function showConflict(reply) {
  const s = reply.conflict && reply.conflict.score;
  $("#conflict").textContent = reply.error + (s ? `\nSaved meanwhile: ${s.rater}: ${scoreText(s)}` +
    (s.note ? ` — “${s.note}”` : "") + ` at ${s.scored_at}` : "") +
    "\nYour choices below are kept; to replace that score, give a reason and save again.";
  $("#conflict").hidden = false;
}

async function save(next) {
  const f = $("#score-form");
  $("#error").textContent = ""; $("#saved").textContent = "";
  if (!f.success.value) { $("#error").textContent = "choose success or failure (keys y / n)"; return; }
  const success = f.success.value === "yes";
  const body = { rater: $("#rater").value, success, note: $("#note").value, reason: $("#reason").value || null,
                 failure_mode: success ? null : ((f.querySelector("input[name=failure_mode]:checked") || {}).value || null),
                 version: data.version };
  let res;
  try {
    res = await post(`/api/attempts/${encodeURIComponent(attemptId)}/score?${q()}`, body);
  } catch (e) {
    if (e.status === 409 && e.data && e.data.conflict) {
      await refreshScores();
      showConflict(e.data);
    } else $("#error").textContent = e.message;
    return;
  }
  $("#conflict").hidden = true;
  if (next && res.next_unscored) {
    location.assign(`/review/${encodeURIComponent(res.next_unscored)}?${new URLSearchParams(
      { rater: body.rater, ...VIEW, ...(blind ? { blind: "1" } : {}) })}`);
    return;
  }
  const rater = $("#rater").value;
  f.reset();
  $("#rater").value = rater;
  $("#modes").hidden = true;
  await refreshScores();
  $("#saved").textContent = `saved: ${scoreText(body)}` + (next ? (Object.keys(VIEW).length ? " — every attempt in this view is scored" : " — every attempt is scored (nothing left for you here)") : "");
}

// Keyboard-only scoring (common.js: the same keys as on the bench page). Escape is never used here
// (it is the bench page's E-STOP key); keys typed into a text field stay text.
const scoring = scoringKeys({ active: () => !!data && data.status === "complete", modes: () => data.trial.failure_modes,
                              save: (shift) => save(shift), say: (text) => { $("#error").textContent = text; } });
document.addEventListener("keydown", (ev) => {
  if (scoring(ev)) return;
  const focus = document.activeElement || document.body;
  if (isTextField(focus) || focus.tagName === "SELECT" || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (ev.key === ",") step(-1);
  else if (ev.key === ".") step(1);
});

$("#play").addEventListener("click", () => setPlaying(!playing));
$("#back1").addEventListener("click", () => step(-1));
$("#fwd1").addEventListener("click", () => step(1));
$("#speed").addEventListener("change", () => { for (const v of videos) v.playbackRate = Number($("#speed").value); });
$("#scrubber").addEventListener("input", () => { if (playing) setPlaying(false); seek(Number($("#scrubber").value)); });
$("#timeline").addEventListener("click", (ev) => {
  const cv = $("#timeline"), r = cv.getBoundingClientRect(), pad = 30 * r.width / cv.width;
  seek(((ev.clientX - r.left - pad) / (r.width - 2 * pad)) * duration());
});
$("#score-form").addEventListener("change", (ev) => { if (ev.target.name === "success") $("#modes").hidden = ev.target.value !== "no"; });
$("#rater").addEventListener("change", load);
$("#score-form").addEventListener("submit", (ev) => { ev.preventDefault(); save(false); });
$("#save-next").addEventListener("click", () => save(true));
$("#rater").value = params.get("rater") || "";
$("#back").href = "/review?" + new URLSearchParams({ rater: params.get("rater") || "", ...VIEW, ...(blind ? { blind: "1" } : {}) });
api("/api/meta").then(m => { $("#campaign").textContent = m.campaign; if (!$("#rater").value) $("#rater").value = m.rater; load(); });
