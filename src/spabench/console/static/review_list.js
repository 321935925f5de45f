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

async function load() {
  const q = new URLSearchParams();
  for (const k of ["rater", "task", "condition", "alias"]) if ($("#" + k).value) q.set(k, $("#" + k).value);
  if ($("#blind").checked) q.set("blind", "1");
  if ($("#unscored").checked) q.set("unscored", "1");
  history.replaceState(null, "", "?" + q.toString());
  const data = await api("/api/attempts?" + q.toString());
  fillSelect($("#task"), data.options.task, params.get("task"));
  fillSelect($("#condition"), data.options.condition, params.get("condition"));
  fillSelect($("#alias"), data.options.alias, params.get("alias"));
  if (!$("#rater").value) $("#rater").value = data.rater;
  $("#blind-banner").hidden = !data.blind;
  const link = new URLSearchParams({ rater: $("#rater").value });
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

for (const k of ["rater", "task", "condition", "alias"]) $("#" + k).value = params.get(k) || "";
$("#blind").checked = params.get("blind") === "1";
$("#unscored").checked = params.get("unscored") === "1";
for (const id of ["blind", "unscored", "task", "condition", "alias"]) $("#" + id).addEventListener("change", load);
$("#rater").addEventListener("change", load);
api("/api/meta").then(m => { $("#campaign").textContent = m.campaign; load(); });
