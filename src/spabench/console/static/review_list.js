// The attempt list: filters live in the URL so a rater can bookmark a view.
"use strict";
const params = new URLSearchParams(location.search);

function fillSelect(sel, values, current) {
  if (sel.options.length > 1) return;
  for (const v of values) sel.append(el("option", { value: v, text: v }));
  sel.value = current || "";
}

// the scene's alignment at "scene ready"; an attempt started below the threshold shows its override reason
function alignmentCell(a) {
  if (a.alignment === null || a.alignment === undefined) return el("td", { class: "muted", text: "—" });
  const over = a.alignment_override;
  return el("td", { class: over ? "bad" : "", title: over ? `started below the threshold: ${over}` : "",
    text: Number(a.alignment).toFixed(3) + (over ? ` — override: ${over}` : "") });
}

// the filters in force: the URL's at first (a select has no options to take them until the first
// answer), then the selects'
const FILTERS = ["task", "condition", "alias"];
const view = Object.fromEntries(FILTERS.map(k => [k, params.get(k) || ""]));

async function load() {
  const q = new URLSearchParams();
  if ($("#rater").value) q.set("rater", $("#rater").value);
  for (const k of FILTERS) if (view[k]) q.set(k, view[k]);
  if ($("#blind").checked) q.set("blind", "1");
  if ($("#unscored").checked) q.set("unscored", "1");
  history.replaceState(null, "", "?" + q.toString());
  const data = await api("/api/attempts?" + q.toString());
  for (const k of FILTERS) fillSelect($("#" + k), data.options[k], view[k]);
  if (!$("#rater").value) $("#rater").value = data.rater;
  $("#blind-banner").hidden = !data.blind;
  const link = new URLSearchParams({ rater: $("#rater").value });
  for (const k of FILTERS) if (view[k]) link.set(k, view[k]);
  if (data.blind) link.set("blind", "1");
  $("#rows").replaceChildren(...data.attempts.map(a => el("tr", { "data-attempt": a.attempt_id },
    el("td", {}, el("a", { href: `/review/${a.attempt_id}?${link}`, text: a.attempt_id })),
    el("td", { text: a.alias }), el("td", { text: a.task }), el("td", { text: a.condition }),
    el("td", { text: a.status + (a.invalid_reason ? ` (${a.invalid_reason})` : "") }),
    el("td", { text: a.stop_reason || "" }),
    alignmentCell(a),
    el("td", { text: a.status !== "complete" ? "— (invalid: re-run)" : (a.scores.length ? a.scores.map(s => `${s.rater}: ${scoreText(s)}`).join("; ") : "unscored") }))));
  $("#count").textContent = `${data.attempts.length} attempt(s)`;
}

$("#rater").value = params.get("rater") || "";
$("#blind").checked = params.get("blind") === "1";
$("#unscored").checked = params.get("unscored") === "1";
for (const id of ["blind", "unscored"]) $("#" + id).addEventListener("change", load);
for (const k of FILTERS) $("#" + k).addEventListener("change", () => { view[k] = $("#" + k).value; load(); });
$("#rater").addEventListener("change", load);
api("/api/meta").then(m => { $("#campaign").textContent = m.campaign; load(); });
