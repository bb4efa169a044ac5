// The dashboard's approvals card: a job's requests (``[job] approve = "best"`` and publish
// requests); each pending one shows its candidate beside what it would replace (val scores
// with 95% intervals, their paired difference, the diff, sample outputs side by side) and
// offers approve, reject (with a reason the search's reflection reads) and edit (new text,
// scored by the job like any child). Data comes from /api; text is always set as text.
"use strict";

(function () {
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "onclick") node.addEventListener("click", value);
      else if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value);
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  async function call(path, options) {
    const response = await fetch(path, { credentials: "same-origin", ...(options || {}) });
    if (response.status === 401) { location.href = "/login"; throw new Error("sign in first"); }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(body.detail || `${response.status} ${response.statusText}`);
    return body;
  }

  const pct = (v) => (v === null || v === undefined ? "–" : `${(v * 100).toFixed(1)}%`);
  const signed = (v) => `${v >= 0 ? "+" : ""}${(v * 100).toFixed(1)}`;
  const short = (id) => (id ? id.slice(0, 10) : "–");
  const summary = (s) => (s ? `${pct(s.mean)} [${pct(s.low)}, ${pct(s.high)}] n=${s.n}` : "no val scores");
  const shown = (run) => (!run ? "–" : run.error ? `error: ${run.error}` : typeof run.output === "string" ? run.output : JSON.stringify(run.output));

  function diffBlock(text) {
    return el("pre", { class: "diff" }, text.split("\n").map((line) => {
      const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
      return el("span", { class: kind }, `${line}\n`);
    }));
  }

  function reviewBlock(review, onDecided) {
    const a = review.approval;
    const current = review.current;
    const status = el("p", { class: "error-box" });
    const decide = async (body) => {
      try {
        await call(`/api/approvals/${encodeURIComponent(a.id)}`, {
          method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
        onDecided();
      } catch (error) { status.textContent = error.message; }
    };
    const reason = el("input", { type: "text", class: "reason", placeholder: "reason (the reflection model reads it)" });
    const editors = Object.entries(review.candidate.components).map(([name, text]) => {
      const area = el("textarea", { rows: "6", "data-component": name });
      area.value = text;
      return [name, area];
    });
    const edited = () => Object.fromEntries(editors.map(([name, area]) => [name, area.value]));
    const what = a.kind === "publish" ? `publish as ${a.target}` : "become the best";
    const d = review.difference;
    const rows = review.samples.map((s) => el("tr", { "data-example": s.example_id },
      el("td", {}, s.example_id, el("div", { class: "muted" }, s.input ? JSON.stringify(s.input) : "")),
      el("td", {}, el("pre", {}, shown(s.candidate)), s.candidate ? pct(s.candidate.score) : ""),
      el("td", {}, el("pre", {}, shown(s.current)), s.current ? pct(s.current.score) : "")));
    return el("div", { class: "approval", "data-approval": a.id },
      el("h3", {}, `Request ${a.id}: candidate ${short(a.candidate_id)} would ${what}`),
      el("table", { class: "scores" },
        el("tr", {}, el("th", {}, ""), el("th", {}, "val (95% interval)")),
        el("tr", {}, el("td", {}, `candidate ${short(review.candidate.candidate_id)}`), el("td", { class: "candidate-score" }, summary(review.candidate.val))),
        el("tr", {}, el("td", {}, current.label), el("td", { class: "current-score" }, summary(current.val))),
        d ? el("tr", {}, el("td", {}, "difference"), el("td", {}, `${signed(d.difference)} points [${signed(d.low)}, ${signed(d.high)}] n=${d.n}: ${d.verdict}`)) : null),
      review.diff ? diffBlock(review.diff) : el("p", { class: "muted" }, "no text changes"),
      rows.length ? el("table", { class: "samples" },
        el("tr", {}, ["example", "candidate", current.label].map((t) => el("th", {}, t))), rows) : null,
      el("div", { class: "controls" },
        el("button", { class: "approve", onclick: () => decide({ action: "approve" }) }, "Approve"), " ",
        reason, " ",
        el("button", { class: "reject", onclick: () => decide({ action: "reject", reason: reason.value }) }, "Reject")),
      a.kind === "best" ? el("details", { class: "edit" }, el("summary", {}, "Edit the candidate's text"),
        editors.map(([name, area]) => [el("h4", {}, name), area]),
        el("button", { class: "submit-edit", onclick: () => decide({ action: "edit", edited: edited(), reason: reason.value || null }) }, "Submit edit")) : null,
      status);
  }

  // Fill ``box`` with the job's requests; ``onDecided`` runs after a decision is stored.
  async function fill(box, jobId, onDecided) {
    const listed = await call(`/api/jobs/${encodeURIComponent(jobId)}/approvals`);
    const requests = listed.approvals;
    if (!requests.length) { box.replaceChildren(); box.hidden = true; return; }
    box.hidden = false;
    const pending = requests.filter((a) => a.status === "pending");
    const reviews = await Promise.all(pending.map((a) => call(`/api/approvals/${encodeURIComponent(a.id)}`)));
    const decided = requests.filter((a) => a.status !== "pending").map((a) => el("tr", { "data-approval": a.id },
      el("td", {}, a.id), el("td", {}, a.kind), el("td", { class: "status" }, a.status + (a.applied ? "" : " (not applied yet)")),
      el("td", {}, short(a.candidate_id)), el("td", {}, pct(a.score)), el("td", {}, a.result || a.reason || "")));
    const parts = [el("h2", {}, pending.length ? `Waiting for approval (${pending.length})` : "Approvals"),
      ...reviews.map((r) => reviewBlock(r, onDecided)),
      decided.length ? el("table", { class: "decided" },
        el("tr", {}, ["request", "kind", "status", "candidate", "val", ""].map((t) => el("th", {}, t))), decided) : null];
    box.replaceChildren(...parts.filter((part) => part !== null));
  }

  window.emeryApprovals = { fill };
})();
