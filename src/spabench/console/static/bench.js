// The bench page: polls the session's state, shows the section of the current phase, streams the
// latest JPEG of each visible camera, and sends commands, stop requests and the score.
"use strict";
const CAMERAS = ["wrist", "middle", "left", "right", "overhead"];
let meta = { stream_hz: 8, threshold: 0.85 };
let state = { phase: "starting" };
let shownVersion = -1;
let shownRendered = "";  // the rendered reference's files as last shown (the twin's views may arrive later)
const streams = new Map();  // img element -> camera (live while attached to the DOM)
const VIEWER = Math.random().toString(36).slice(2, 12);  // this page, for the server's cap on live viewers

function stream(img, cam) {
  streams.set(img, cam);
  const hz = meta.stream_hz || 8;
  const next = () => {
    if (!img.isConnected) { streams.delete(img); return; }
    setTimeout(() => { img.src = `/api/bench/frame/${cam}.jpg?viewer=${VIEWER}&t=${Date.now()}`; }, 1000 / hz);
  };
  img.onload = next;
  img.onerror = () => setTimeout(next, 300);
  img.src = `/api/bench/frame/${cam}.jpg?viewer=${VIEWER}&t=${Date.now()}`;
  return img;
}

function show(id, visible) { $("#" + id).hidden = !visible; }

async function command(name, payload) {
  $("#error").textContent = "";
  try { await post("/api/bench/command", { command: name, payload: payload || {}, version: state.version }); }
  catch (e) { $("#error").textContent = e.message; }
}

async function stopRollout(kind, source) {
  window.__lastStop = { kind, source, t: Date.now() };
  try { await post(`/api/bench/stop/${kind}?source=${source}`); }
  catch (e) { $("#error").textContent = e.message; }
}

function renderCameraCheck(s) {
  const grid = $("#cc-grid");
  if (!grid.children.length) {
    // operator.rater= fills it in; otherwise the person types it (a redraw never clears what they typed)
    if (!$("#rater-name").value) $("#rater-name").value = s.rater || "";
    $("#rater-name").title = s.rater_rule || "";
    for (const c of s.cameras || []) {
      grid.append(el("div", { class: "cam", "data-camera": c.name },
        el("div", { class: "name", text: c.name }), stream(el("img", { alt: c.name + " camera" }), c.name),
        el("div", { class: "info" })));
    }
  }
  for (const c of s.cameras || []) {
    const box = $(`[data-camera="${c.name}"]`, grid);
    if (!box) continue;
    const verdict = s.measuring ? "measuring…" : (!c.live ? "NO FRAMES" : (c.frozen ? "FROZEN" : (c.slow ? "SLOW" : "live")));
    box.classList.toggle("dead", !s.measuring && c.ok === false);
    $(".info", box).textContent = `${verdict} · ` +
      `${c.width || "?"}×${c.height || "?"} · ${fmtNum(c.measured_hz, 1, " Hz")} measured, ${fmtNum(c.new_frames_hz, 1, " Hz")} new images` +
      (c.configured_fps ? ` (configured ${c.configured_fps} fps)` : "");
  }
  const missing = CAMERAS.filter(n => !(s.cameras || []).some(c => c.name === n && c.live));
  const failed = (s.problems || []).length ? s.problems.join(" · ") : `Not live: ${missing.join(", ")}`;
  $("#cc-status").textContent = s.measuring ? "Measuring frame rates…" :
    (s.all_live ? "All five cameras are live." : `Camera check failed: ${failed}`);
  $("#cc-status").className = s.measuring ? "muted" : (s.all_live ? "ok" : "bad");
  $("#confirm-cameras").disabled = !s.all_live;
}

function renderCard(card) {
  if (!card) return;
  $("#card-k").textContent = `${card.k} of ${card.n}`;
  $("#card-alias").textContent = card.alias;
  $("#card-trial").textContent = `${card.k} of ${card.n} (${card.pending} to go)` + (card.rerun ? ` — ${card.rerun}` : "");
  $("#card-eta").textContent = card.time_left_s === null ? `— (${card.estimate_basis})` :
    `${fmtSeconds(card.time_left_s)} (${fmtNum(card.per_trial_s, 0, " s")} per trial; ${card.estimate_basis})`;
  $("#card-task").textContent = card.task;
  $("#card-condition").textContent = card.condition;
  $("#card-scene").textContent = `${card.scene_id} (evaluation ${card.evaluation_id})`;
  $("#card-instruction").textContent = `“${card.instruction}”`;
  const ul = $("#card-checklist");
  ul.replaceChildren(...(card.checklist || []).map(line => {
    const item = line.startsWith("[ ] ");
    return el("li", {}, item ? el("label", {}, el("input", { type: "checkbox" }), " " + line.slice(4)) : el("span", { class: "muted", text: line }));
  }));
}

function roiBox(roi) {
  const [x0, y0, x1, y1] = roi || [0, 0, 1, 1];
  return el("div", { class: "roi", style: `left:${x0 * 100}%;top:${y0 * 100}%;width:${(x1 - x0) * 100}%;height:${(y1 - y0) * 100}%` });
}

function renderReset(s) {
  const card = s.card || {};
  const first = !!card.first_attempt;
  const rendered = (card.rendered && card.rendered.files) || [];
  show("first-attempt", first);
  const box = $("#overlays");
  box.replaceChildren();
  let overlaid = 0;
  for (const cam of ["middle", "overhead"]) {
    const parts = [stream(el("img", { class: "live", alt: `live ${cam}` }), cam)];
    let label = "";
    if (!first && card.references && card.references[cam]) {
      parts.push(el("img", { class: "ref", id: `ref-${cam}`, alt: `reference ${cam}`, src: `/api/bench/reference/${cam}.png?v=${s.version}` }));
      label = " + reference";
    } else if (first && rendered.includes(cam)) {  // no real reference yet: the twin's rendering of the specification
      parts.push(el("img", { class: "ref rendered", id: `ref-${cam}`, alt: `rendered reference ${cam}`, src: `/api/bench/rendered/${cam}.png?v=${s.version}` }));
      label = " + rendered reference (twin)";
    }
    if (label) overlaid++;
    parts.push(roiBox(s.roi));
    box.append(el("div", { class: "cam" }, el("div", { class: "name", text: `${cam} — live${label}` }),
      el("div", { class: "overlay" }, ...parts)));
  }
  show("overlay-tools", overlaid > 0);
  renderRendered(s, card, rendered);
  applyOverlay();
}

// The rendered reference beside the real one: the placement diagram, then per camera the twin's view
// and (once the evaluation's first attempt exists) the real reference frame.
function renderRendered(s, card, rendered) {
  show("rendered-ref", rendered.length > 0);
  const figure = (src, caption, id) => el("figure", {}, el("a", { href: src, target: "_blank" },
    el("img", { src, alt: caption, id })), el("figcaption", { text: caption }));
  const items = [];
  if (rendered.includes("placement")) {
    items.push(figure(`/api/bench/rendered/placement.png?v=${s.version}`, "Placement diagram (seen from above; 1 cm grid)", "rendered-placement"));
  }
  for (const cam of ["overhead", "middle"]) {
    if (rendered.includes(cam)) items.push(figure(`/api/bench/rendered/${cam}.png?v=${s.version}`, `${cam}: rendered (twin)`, `rendered-${cam}`));
    if (!card.first_attempt && card.references && card.references[cam]) {
      items.push(figure(`/api/bench/reference/${cam}.png?v=${s.version}`, `${cam}: real reference (first attempt)`, `real-${cam}`));
    }
  }
  $("#rendered-grid").replaceChildren(...items);
  $("#rendered-grid").classList.toggle("few", items.length <= 3);
  const problem = (card.rendered || {}).problem;
  $("#rendered-note").textContent = (problem ? `No twin views: ${problem}. ` : "") +
    "Yaw: 0° = the object's length points forward (away from the robot base); + turns counterclockwise seen from above " +
    "(toward the robot's left). Click an image to open it full size.";
}

function applyOverlay() {
  const op = $("#opacity").value / 100, diff = $("#difference").checked;
  for (const img of $$("img.ref")) { img.style.opacity = op; img.classList.toggle("diff", diff); }
}

function renderAlignment(s) {
  const out = $("#alignment");
  const card = s.card || {};
  if (card.first_attempt) { out.textContent = "No real reference yet: alignment is not scored for this attempt (the overlay is rendered from the specification)."; out.className = "score-line muted"; return; }
  const a = s.alignment || {};
  const thr = s.threshold;
  const cams = Object.keys(a);
  if (!cams.length) { out.textContent = `Alignment: measuring… (threshold ${thr})`; out.className = "score-line muted"; return; }
  const ok = cams.every(c => a[c] >= thr);
  out.textContent = "Alignment with the reference: " + cams.map(c => `${c} ${a[c].toFixed(3)}`).join(" · ") +
    ` — threshold ${thr} — ${ok ? "matches" : "does not match yet"}`;
  out.className = "score-line " + (ok ? "ok" : "bad");
  // below the threshold "Scene ready" needs a reason (the session refuses it without one)
  if (!ok || s.needs_override) show("override-box", true);
}

function renderRolloutGrid() {
  const grid = $("#live-grid");
  grid.replaceChildren(...CAMERAS.map(c => el("div", { class: "cam" }, el("div", { class: "name", text: c }),
    stream(el("img", { alt: `live ${c}` }), c))));
}

function renderLive(live) {
  if (!live) return;
  $("#time-left").textContent = fmtNum(live.time_left_s, 1, " s");
  $("#rate").textContent = fmtNum(live.rate_hz, 1, " Hz");
  $("#latency").textContent = fmtNum(live.latency_ms, 0, " ms");
  $("#steps").textContent = live.steps;
  $("#clamps").textContent = live.clamps;
}

function renderScore(s) {
  const f = s.form || {};
  $("#rater").textContent = s.rater || "";
  $("#score-result").textContent = f.result ? `Stopped by ${f.result.stop_reason} after ${f.result.duration_s} s (${f.result.steps} steps). ` +
    `Task ${f.task}, condition ${f.condition}: “${f.instruction}”` : "";
  const modes = $("#modes");
  modes.replaceChildren(el("legend", { text: "Failure mode (one; annotation only, the outcome stays binary)" }),
    ...(f.failure_modes || []).map(modeChoice));
  const form = $("#score-form");
  form.reset();
  modes.hidden = true;
  const pre = $("#score-prefill");
  if (f.prefill) {
    pre.hidden = false;
    pre.textContent = `Pre-filled from motion detection (${f.condition}: success means no arm or gripper motion): ` +
      `${f.prefill.success ? "success" : "failure"}${f.prefill.failure_mode ? " — " + f.prefill.failure_mode : ""}. Check it, then save.`;
    form.success.value = f.prefill.success ? "yes" : "no";
    if (!f.prefill.success) {
      modes.hidden = false;
      const r = form.querySelector(`input[name=failure_mode][value="${f.prefill.failure_mode}"]`);
      if (r) r.checked = true;
    }
  } else pre.hidden = true;
}

function renderEstopCause(s) {
  $("#ec-during").textContent = `The arm holds where it stopped (e-stop during ${s.during}). Say why:`;
  const box = $("#ec-causes");
  box.replaceChildren(el("legend", { text: "Cause" }), ...(s.causes || []).map(c => {
    const label = el("label", {}, [el("input", { type: "radio", name: "cause", value: c.name }), " " + c.label]);
    if (c.effect) label.append(el("small", { class: "muted", text: ` — ${c.effect}` }));
    return label;
  }));
  $("#estop-cause-form").reset();
}

// The cool-down (issue 34): the hottest motor, its temperature, the resume threshold and the estimated
// time left (the session's cooling rate; "estimating" until it has one), then where the arm is and what
// to do. Its panel is built here and shown only while the session waits for the motors.
function etaText(eta) {
  if (eta === null || eta === undefined) return "estimating the time left";
  const s = Math.round(eta);
  return s >= 60 ? `about ${Math.floor(s / 60)} min ${s % 60} s left` : `about ${s} s left`;
}

function renderCooling(s) {
  let box = $("#cooling");
  if (!box) {
    box = el("section", { class: "panel", id: "cooling", hidden: true }, el("h2", { text: "Cooling down" }),
      el("p", { id: "cool-status" }), el("p", { id: "cool-arm" }));
    $("#message").after(box);
  }
  const c = s.phase === "cooling" ? s.cooling : null;
  box.hidden = !c;
  if (!c) return;
  $("#cool-status").replaceChildren("Hottest motor ", el("b", { id: "cool-motor", text: c.motor }), " at ",
    el("b", { id: "cool-temp", text: `${Math.round(c.temperature_c)} °C` }), " · resumes below ",
    el("b", { id: "cool-resume", text: `${c.resume_c} °C` }), " · ", el("b", { id: "cool-eta", text: etaText(c.eta_s) }));
  $("#cool-arm").textContent = c.arm || "";
}

// A comparison campaign's stopping rule (issue 38): "keep going" or "decided" with the evidence so far,
// the session's own numbers and words (the terminal's line), by aliases only; shown at the scene reset
// and the score, absent otherwise.
function renderComparison(s) {
  const c = ["reset", "score"].includes(s.phase) ? s.comparison : null;
  show("comparison", !!c);
  if (!c) return;
  $("#cmp-pair").textContent = `${c.a} vs ${c.b}`;
  const verdict = c.verdict === "decided" ? `decided: ${c.winner}` : c.verdict;
  $("#cmp-verdict").textContent = `${verdict} · ${c.pairs} ${c.pairs === 1 ? "pair" : "pairs"} so far`;
  $("#cmp-verdict").className = "score-line " + (c.verdict === "keep going" ? "muted" : "ok");
  $("#cmp-evidence").textContent = c.e_value === null ? "No pair yet." :
    `e-value ${c.e_value} of threshold ${c.threshold} · discordant pairs ${c.discordant} ` +
    `(${c.b} won ${c.b_wins}, ${c.a} won ${c.a_wins})`;
  $("#cmp-rule").textContent = `${c.head}: ${c.text}`;
}

function render(s) {
  state = s;
  $("#phase").textContent = s.phase;
  $("#message").textContent = s.message || "";
  renderCooling(s);
  renderComparison(s);
  if (s.error) $("#error").textContent = s.error;
  // a console without a session has no E-STOP: it could not stop anything (a live session's page can)
  $("#estop").hidden = s.phase === "offline";
  show("live-console", !!s.live_console);
  if (s.live_console) $("#live-console-link").href = s.live_console;
  const rolling = s.phase === "rollout";
  $("#stop").disabled = !rolling;
  $("#abort").disabled = !rolling;
  const rendered = JSON.stringify((s.card || {}).rendered || null);
  if (s.version === shownVersion && s.phase === "reset" && rendered !== shownRendered) {
    shownRendered = rendered;  // the background worker drew the twin's views meanwhile: show them
    renderReset(s);
  }
  if (s.version !== shownVersion) {
    shownVersion = s.version;
    shownRendered = rendered;
    if (!s.error) $("#error").textContent = "";
    show("camera-check", s.phase === "camera_check");
    show("card", ["reset", "homing", "rollout", "stopping"].includes(s.phase) && !!s.card);
    show("reset", s.phase === "reset");
    show("rollout", s.phase === "rollout");
    show("score", s.phase === "score");
    show("estop-cause", s.phase === "estop_cause");
    show("checklist-box", s.phase === "reset" || s.phase === "homing");
    if (s.phase !== "camera_check") $("#cc-grid").replaceChildren();
    if (s.card) renderCard(s.card);
    if (s.phase === "reset") {
      // a new question: the reason typed for the last one goes (a redraw of this one keeps it)
      show("override-box", false);
      $("#override-reason").value = "";
      renderReset(s);
    }
    if (s.phase === "rollout") {
      for (const id of ["time-left", "rate", "latency", "steps", "clamps"]) $("#" + id).textContent = "—";
      renderRolloutGrid();
    } else $("#live-grid").replaceChildren();
    if (s.phase === "score") renderScore(s);
    if (s.phase === "estop_cause") renderEstopCause(s);
  }
  if (s.phase === "camera_check") renderCameraCheck(s);
  if (s.phase === "reset") renderAlignment(s);
  if (s.phase === "rollout") renderLive(s.live);
}

async function poll() {
  try {
    const s = await api(`/api/bench/state?viewer=${VIEWER}`);
    // back (a restarted console process answers on the same port): the page works on as it was
    if ($("#error").textContent.startsWith("console unreachable")) $("#error").textContent = "";
    render(s);
  } catch (e) {
    // an ended session's console closes with it: its closing message stays on the page
    if (state.phase === "ended") { $("#error").textContent = ""; $("#closed").hidden = false; return; }
    $("#error").textContent = "console unreachable: " + e.message;
  }
  setTimeout(poll, 200);
}

$("#estop").addEventListener("click", () => stopRollout("estop", "button"));
$("#stop").addEventListener("click", () => stopRollout("operator_stop", "button"));
$("#abort").addEventListener("click", () => stopRollout("abort", "button"));
$("#confirm-cameras").addEventListener("click", () => command("confirm_cameras", { rater: $("#rater-name").value.trim() }));
$("#end-at-check").addEventListener("click", () => command("end"));
$("#ready").addEventListener("click", () => {
  const payload = { shown: { alignment: state.alignment || {}, threshold: state.threshold } };
  const reason = $("#override-box").hidden ? "" : $("#override-reason").value.trim();
  if (reason) payload.override_reason = reason;
  command("ready", payload);
});
$("#end-session").addEventListener("click", () => command("end"));
$("#opacity").addEventListener("input", applyOverlay);
$("#difference").addEventListener("change", applyOverlay);
$("#score-form").addEventListener("change", (ev) => {
  if (ev.target.name === "success") $("#modes").hidden = ev.target.value !== "no";
});
$("#score-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const form = ev.target;
  if (!form.success.value) { $("#error").textContent = "choose success or failure (keys y / n)"; return; }
  const success = form.success.value === "yes";
  const mode = success ? null : (form.querySelector("input[name=failure_mode]:checked") || {}).value || null;
  const payload = { success, failure_mode: mode, note: $("#note").value };
  const shown = state.form || {};   // the attempt this page was asked about (the state moves on meanwhile)
  const entry = `${shown.alias} · ${shown.trial_id}: ${scoreText(payload)}` + (payload.note ? ` — note: ${payload.note}` : "");
  $("#error").textContent = "";
  $("#submit-score").disabled = true;   // one save in flight per page
  try {
    await post("/api/bench/command", { command: "score", payload, version: state.version });
  } catch (e) {
    if (e.status === 409 && e.data && e.data.conflict) showScoreConflict(e.data, entry, { trial_id: shown.trial_id, ...payload });
    else $("#error").textContent = e.message;
    return;
  } finally { $("#submit-score").disabled = false; }
  show("last", true);
  $("#last-score").textContent = entry;
  $("#last-score").dataset.score = JSON.stringify({ trial_id: shown.trial_id, ...payload });
});

// Another page (tab) answered first: as on the review page, say whose score was saved, save
// nothing, and keep this page's entry on screen (it outlives the score form, which the session's
// next phase hides) until dismissed.
function showScoreConflict(reply, entry, data) {
  $("#sc-text").textContent = `${reply.error}\nYour score below was not saved. To replace the saved one, rescore ` +
    "the attempt on the review page (Review, above) with a reason.";
  $("#sc-entry").textContent = entry;
  $("#score-conflict").dataset.entry = JSON.stringify(data);
  show("score-conflict", true);
}
$("#sc-dismiss").addEventListener("click", () => show("score-conflict", false));
$("#leave").addEventListener("click", () => command("leave"));
$("#estop-cause-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const cause = (ev.target.querySelector("input[name=cause]:checked") || {}).value;
  if (!cause) { $("#error").textContent = "choose why the e-stop came"; return; }
  await command("estop_cause", { cause, text: $("#ec-text").value });
});
// E-stop keys by phase: while the arm moves (homing, rollout, stopping) Esc and Space e-stop from
// whatever has focus, and do nothing else. In the other phases a key typed in a text field (rater
// name, override reason, note) belongs to the field, Esc only leaves it; outside a text field Esc
// e-stops, while Space and Enter stay with the focused checkbox, radio or button.
const MOTION_PHASES = ["homing", "rollout", "stopping"];
const scoring = scoringKeys({ active: () => state.phase === "score" && !$("#score").hidden,
                              modes: () => (state.form || {}).failure_modes, save: () => $("#score-form").requestSubmit(),
                              say: (text) => { $("#error").textContent = text; } });
document.addEventListener("keydown", (ev) => {
  const focus = document.activeElement || document.body;
  const key = ev.key.toLowerCase();
  const session = !["offline", "ended"].includes(state.phase);
  if (session && (ev.key === "Escape" || ev.key === " ")) {
    if (MOTION_PHASES.includes(state.phase)) { ev.preventDefault(); stopRollout("estop", "key"); return; }
    if (isTextField(focus)) { if (ev.key === "Escape") { ev.preventDefault(); focus.blur(); } return; }
    if (ev.key === "Escape") { ev.preventDefault(); stopRollout("estop", "key"); return; }
  }
  if (scoring(ev)) return;
  if (isTextField(focus) || focus.tagName === "SELECT") return;
  if (state.phase === "rollout" && key === "s") stopRollout("operator_stop", "key");
  else if (state.phase === "rollout" && key === "a") stopRollout("abort", "key");
  else if (state.phase === "reset" && key === "enter") { ev.preventDefault(); $("#ready").click(); }
});
api("/api/meta").then(m => { meta = m; $("#campaign").textContent = m.campaign; poll(); });
