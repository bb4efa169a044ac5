// The dashboard's approvals card: a job's requests (``[job] approve = "best"`` and publish
// requests); each pending one shows its candidate beside what it would replace (val scores
// with 95% intervals, their paired difference, the diff, sample outputs side by side) and
// offers approve, reject (with a reason the search's reflection reads) and edit (new text,
// scored by the job like any child). Data comes from /api; text is always set as text.
"use strict";

(function () {
  // h, api, pct and short are app.js's (loaded after this file, called at event time).
  const signed = (v) => `${v >= 0 ? "+" : ""}${(v * 100).toFixed(1)}`;
  const summary = (s) => (s ? `${pct(s.mean)} [${pct(s.low)}, ${pct(s.high)}] n=${s.n}` : "no val scores");
  const shown = (run) => (!run ? "–" : run.error ? `error: ${run.error}` : typeof run.output === "string" ? run.output : JSON.stringify(run.output));

  function diffBlock(text) {
    return h("pre", { class: "diff" }, text.split("\n").map((line) => {
      const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
      return h("span", { class: kind }, `${line}\n`);
    }));
  }

  function reviewBlock(review, onDecided) {
    const a = review.approval;
    const current = review.current;
    const status = h("p", { class: "error-box" });
    const decide = async (body) => {
      try {
        await api(`/api/approvals/${encodeURIComponent(a.id)}`, {
          method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
        onDecided();
      } catch (error) { status.textContent = error.message; }
    };
    const reason = h("input", { type: "text", class: "reason", placeholder: "reason (the reflection model reads it)" });
    const editors = Object.entries(review.candidate.components).map(([name, text]) => {
      const area = h("textarea", { rows: "6", "data-component": name });
      area.value = text;
      return [name, area];
    });
    const edited = () => Object.fromEntries(editors.map(([name, area]) => [name, area.value]));
    const what = a.kind === "publish" ? `publish as ${a.target}` : "become the best";
    const d = review.difference;
    const rows = review.samples.map((s) => h("tr", { "data-example": s.example_id },
      h("td", {}, s.example_id, h("div", { class: "muted" }, s.input ? JSON.stringify(s.input) : "")),
      h("td", {}, h("pre", {}, shown(s.candidate)), s.candidate ? pct(s.candidate.score) : ""),
      h("td", {}, h("pre", {}, shown(s.current)), s.current ? pct(s.current.score) : "")));
    return h("div", { class: "approval", "data-approval": a.id },
      h("h3", {}, `Request ${a.id}: candidate ${short(a.candidate_id)} would ${what}`),
      h("table", { class: "scores" },
        h("tr", {}, h("th", {}, ""), h("th", {}, "val (95% interval)")),
        h("tr", {}, h("td", {}, `candidate ${short(review.candidate.candidate_id)}`), h("td", { class: "candidate-score" }, summary(review.candidate.val))),
        h("tr", {}, h("td", {}, current.label), h("td", { class: "current-score" }, summary(current.val))),
        d ? h("tr", {}, h("td", {}, "difference"), h("td", {}, `${signed(d.difference)} points [${signed(d.low)}, ${signed(d.high)}] n=${d.n}: ${d.verdict}`)) : null),
      review.diff ? diffBlock(review.diff) : h("p", { class: "muted" }, "no text changes"),
      rows.length ? h("table", { class: "samples" },
        h("tr", {}, ["example", "candidate", current.label].map((t) => h("th", {}, t))), rows) : null,
      h("div", { class: "controls" },
        h("button", { class: "approve", onclick: () => decide({ action: "approve" }) }, "Approve"), " ",
        reason, " ",
        h("button", { class: "reject", onclick: () => decide({ action: "reject", reason: reason.value }) }, "Reject")),
      a.kind === "best" ? h("details", { class: "edit" }, h("summary", {}, "Edit the candidate's text"),
        editors.map(([name, area]) => [h("h4", {}, name), area]),
        h("button", { class: "submit-edit", onclick: () => decide({ action: "edit", edited: edited(), reason: reason.value || null }) }, "Submit edit")) : null,
      status);
  }

  // Fill ``box`` with the job's requests; ``onDecided`` runs after a decision is stored.
  async function fill(box, jobId, onDecided) {
    const listed = await api(`/api/jobs/${encodeURIComponent(jobId)}/approvals`);
    const requests = listed.approvals;
    if (!requests.length) { box.replaceChildren(); box.hidden = true; return; }
    box.hidden = false;
    const pending = requests.filter((a) => a.status === "pending");
    const reviews = await Promise.all(pending.map((a) => api(`/api/approvals/${encodeURIComponent(a.id)}`)));
    const decided = requests.filter((a) => a.status !== "pending").map((a) => h("tr", { "data-approval": a.id },
      h("td", {}, a.id), h("td", {}, a.kind), h("td", { class: "status" }, a.status + (a.applied ? "" : " (not applied yet)")),
      h("td", {}, short(a.candidate_id)), h("td", {}, pct(a.score)), h("td", {}, a.result || a.reason || "")));
    const parts = [h("h2", {}, pending.length ? `Waiting for approval (${pending.length})` : "Approvals"),
      ...reviews.map((r) => reviewBlock(r, onDecided)),
      decided.length ? h("table", { class: "decided" },
        h("tr", {}, ["request", "kind", "status", "candidate", "val", ""].map((t) => h("th", {}, t))), decided) : null];
    box.replaceChildren(...parts.filter((part) => part !== null));
  }

  window.emeryApprovals = { fill };
})();
