// spabench console: small helpers shared by every page (no framework, no build step).
"use strict";
const $ = (sel, root) => (root || document).querySelector(sel);
const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  return node;
}

async function api(path, opts) {
  const res = await fetch(path, Object.assign({ cache: "no-store", credentials: "same-origin" }, opts || {}));
  let data = null;
  try { data = await res.json(); } catch (e) { data = { error: `HTTP ${res.status}` }; }
  if (!res.ok) {  // the status and the whole answer go with the error (a 409 says what was saved meanwhile)
    const err = new Error((data && data.error) || `HTTP ${res.status}`);
    err.status = res.status;
    err.data = data;
    throw err;
  }
  return data;
}

// Every state-changing request carries this page's CSRF token (the server put it in the page).
const CSRF = (document.querySelector('meta[name="spabench-csrf"]') || {}).content || "";

function post(path, body) {
  return api(path, { method: "POST", headers: { "content-type": "application/json", "x-spabench-csrf": CSRF },
                     body: JSON.stringify(body || {}) });
}

function fmtSeconds(s) {
  if (s === null || s === undefined) return "—";
  s = Math.max(0, Math.round(s));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return h ? `${h} h ${String(m).padStart(2, "0")} min` : m ? `${m} min ${String(sec).padStart(2, "0")} s` : `${sec} s`;
}

function fmtNum(x, digits, unit) {
  return (x === null || x === undefined || Number.isNaN(x)) ? "—" : `${Number(x).toFixed(digits)}${unit || ""}`;
}

function scoreText(s) {
  if (!s) return "unscored";
  return s.success ? "success" : `failure${s.failure_mode ? " (" + s.failure_mode + ")" : ""}`;
}

// One failure mode as a radio choice: its suite-wide number (the terminal's too), label and
// definition; a mode that does not apply to the trial stays in its place, greyed and disabled.
function modeChoice(m) {
  const input = el("input", { type: "radio", name: "failure_mode", value: m.name });
  input.disabled = !m.applicable;
  return el("label", { class: m.applicable ? "" : "na", title: m.why_not || "" }, input, " ",
    el("b", { text: `${m.number}) ${m.label}` }), el("small", { text: m.applicable ? m.definition : `not for this trial: ${m.why_not}` }));
}

// A focused element that takes typed text: keys pressed there belong to it.
function isTextField(node) {
  if (!node) return false;
  if (node.tagName === "TEXTAREA" || node.isContentEditable) return true;
  return node.tagName === "INPUT" && !["radio", "checkbox", "range", "button", "submit", "reset", "file", "color"].includes(node.type);
}

// Keyboard scoring, the same on the bench page and the review page: y success, n failure, a failure
// mode's number (two digits within a second: 1 then 1 is 11), Enter saves (Shift+Enter passes
// shift to `save`; in the note Ctrl+Enter). Keys typed in a text field stay text. The page's form is
// #score-form with its #modes; `opts.active()`: an attempt can be scored now; `opts.modes()`: the
// failure modes (with their numbers) in the order of the form's choices; `opts.save(shift)`;
// `opts.say(text)`: show an error ("" clears it). Returns a keydown handler that says whether it
// took the key.
function scoringKeys(opts) {
  let digits = "", digitsAt = 0;
  const outcome = (value) => {
    $(`#score-form input[name=success][value=${value}]`).checked = true;
    $("#modes").hidden = value !== "no";
  };
  const chooseMode = (key) => {
    const now = performance.now();
    digits = (now - digitsAt < 1000 ? digits : "") + key;
    digitsAt = now;
    const modes = opts.modes() || [];
    const find = n => $$("#modes input[name=failure_mode]").find((input, i) => modes[i] && modes[i].number === n);
    let input = find(Number(digits));
    if (!input) { digits = key; input = find(Number(key)); }
    if (!input) { opts.say(`no failure mode ${digits}`); return; }
    if (input.disabled) { opts.say(`failure mode ${digits} does not apply to this trial`); return; }
    opts.say("");
    outcome("no");
    input.checked = true;
  };
  return (ev) => {
    if (!opts.active()) return false;
    const focus = document.activeElement || document.body;
    if (ev.key === "Enter") {
      if (focus.tagName === "TEXTAREA" ? !(ev.ctrlKey || ev.metaKey) : ["BUTTON", "A", "SELECT"].includes(focus.tagName)) return false;
      ev.preventDefault();
      opts.save(ev.shiftKey);
      return true;
    }
    if (isTextField(focus) || focus.tagName === "SELECT" || ev.ctrlKey || ev.metaKey || ev.altKey) return false;
    if (ev.key === "y" || ev.key === "n") { outcome(ev.key === "y" ? "yes" : "no"); return true; }
    if (/^[0-9]$/.test(ev.key)) { chooseMode(ev.key); return true; }
    return false;
  };
}
