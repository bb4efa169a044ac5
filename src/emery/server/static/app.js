// The emery dashboard: jobs, a job (chart, controls, lineage, candidate, cost front, usage,
// config, events), a rollout's trace, the runners and the published prompts on live traffic.
// Data comes from /api; text is always set as text.
"use strict";

const LIVE = ["created", "queued", "running"];
const streams = new Map();
let pageToken = 0;

function h(tag, attrs, ...children) {
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

async function api(path, options) {
  const response = await fetch(path, { credentials: "same-origin", ...(options || {}) });
  if (response.status === 401) { location.href = "/login"; throw new Error("sign in first"); }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.detail || `${response.status} ${response.statusText}`);
  return body;
}

const pct = (v) => (v === null || v === undefined ? "–" : `${(v * 100).toFixed(1)}%`);
const short = (id) => (id ? id.slice(0, 10) : "–");
const state = (s) => h("span", { class: `state ${s}`, "data-state": s }, s);
const waitingBadge = (job) => (job.pending_approvals ? h("span", { class: "state waiting", "data-waiting": job.pending_approvals },
  `waiting for approval (${job.pending_approvals})`) : null);

function closeStreams() { for (const source of streams.values()) source.close(); streams.clear(); }

function follow(jobId, onEvent, onEnd) {
  if (streams.has(jobId)) return;
  const source = new EventSource(`/api/jobs/${encodeURIComponent(jobId)}/events/stream`);
  streams.set(jobId, source);
  source.onmessage = null;
  source.addEventListener("end", () => { source.close(); streams.delete(jobId); onEnd(); });
  const kinds = ["baseline_evaluated", "candidate_evaluated", "candidate_proposed", "best_updated",
    "started", "paused", "resumed", "cancelled", "succeeded", "failed", "iteration_completed",
    "checkpoint_saved", "queued", "created", "rollouts_failed", "budget_warning", "mipro.plan", "gepa.plan", "apo.plan",
    "approval_requested", "approval_applied", "train_loss", "val_loss", "train_reward"];
  for (const kind of kinds) source.addEventListener(kind, (m) => onEvent(JSON.parse(m.data)));
}

function budgetBar(job) {
  const used = job.budget.used.metric_calls || 0, limit = job.budget.limits.metric_calls;
  if (!limit) return h("span", { class: "muted" }, `${used} calls`);
  const inner = h("div");
  inner.style.width = `${Math.min(100, (100 * used) / limit)}%`;
  return h("div", { title: `${used} of ${limit} metric calls` }, h("div", { class: "bar" }, inner),
    h("span", { class: "muted" }, `${used} / ${limit}`));
}

// --- jobs page -------------------------------------------------------------------------
async function jobsPage(token) {
  const answer = await api("/api/jobs?limit=200");
  if (token !== pageToken) return;
  const rows = answer.jobs.map((job) => h("tr", { class: "clickable", "data-job": job.id,
      onclick: () => { location.hash = `#/jobs/${job.id}`; } },
    h("td", {}, h("a", { href: `#/jobs/${job.id}` }, job.id)), h("td", {}, job.name),
    h("td", {}, job.algorithm), h("td", {}, state(job.state), waitingBadge(job)), h("td", {}, pct(job.baseline_score)),
    h("td", { class: "best" }, pct(job.best_score)), h("td", {}, budgetBar(job)),
    h("td", { class: "muted" }, new Date(job.created_at).toLocaleString())));
  document.getElementById("view").replaceChildren(
    h("h1", {}, `Jobs (${answer.total})`),
    h("table", { id: "jobs" }, h("tr", {}, ["id", "name", "algorithm", "state", "baseline",
      "best", "budget", "created"].map((t) => h("th", {}, t))), rows));
  let refresh = null;
  const again = () => { clearTimeout(refresh); refresh = setTimeout(() => token === pageToken && jobsPage(token), 300); };
  for (const job of answer.jobs) if (LIVE.includes(job.state)) follow(job.id, again, again);
}

// --- job page --------------------------------------------------------------------------
function lineageRows(candidates, bestId, select) {
  const children = new Map();
  const ids = new Set(candidates.map((c) => c.id));
  for (const c of candidates) {
    const parent = c.lineage.parents.find((p) => ids.has(p)) || "";
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(c);
  }
  const rows = [];
  const walk = (parent, depth) => {
    for (const c of children.get(parent) || []) {
      const score = (split) => (c.scores[split] ? pct(c.scores[split].score) : "–");
      rows.push(h("tr", { class: "clickable", "data-candidate": c.id, onclick: () => select(c.id) },
        h("td", { class: "lineage" }, `${"  ".repeat(depth)}${depth ? "└ " : ""}${short(c.id)}${c.id === bestId ? " ★" : ""}`),
        h("td", {}, c.lineage.operation), h("td", {}, score("val")), h("td", {}, score("train")),
        h("td", {}, score("test"))));
      walk(c.id, depth + 1);
    }
  };
  walk("", 0);
  return rows;
}

function diffView(text) {
  const lines = text.split("\n").map((line) => {
    const kind = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : "";
    return h("span", { class: kind }, `${line}\n`);
  });
  return h("pre", { class: "diff" }, lines);
}

async function candidatePanel(jobId, candidateId, box) {
  const base = `/api/jobs/${encodeURIComponent(jobId)}`;
  const [candidate, diff, evals] = await Promise.all([
    api(`${base}/candidates/${candidateId}`), api(`${base}/candidates/${candidateId}/diff`),
    api(`${base}/evaluations?candidate_id=${candidateId}&limit=200`)]);
  const texts = Object.entries(candidate.components).map(([name, text]) =>
    [h("h3", {}, name), h("pre", { class: "component" }, text || "(empty)")]);
  const evalRows = evals.evaluations.map((e) => h("tr", { class: e.rollout_id ? "clickable" : null,
      "data-rollout": e.rollout_id, onclick: () => e.rollout_id && (location.hash = `#/rollouts/${e.rollout_id}`) },
    h("td", {}, e.split), h("td", {}, e.example_id), h("td", {}, pct(e.score)),
    h("td", {}, h("pre", {}, JSON.stringify(e.output))), h("td", {}, e.feedback || e.error || "")));
  box.replaceChildren(h("h2", {}, `Candidate ${short(candidate.id)} · ${candidate.lineage.operation}`),
    ...texts.flat(), h("h3", {}, diff.against_id ? `Diff against parent ${short(diff.against_id)}` : "No parent to diff against"),
    diff.diff ? h("div", { id: "diff" }, diffView(diff.diff)) : h("p", { class: "muted" }, "no changes"),
    h("h3", {}, `Evaluations (${evals.total})`),
    h("table", { id: "evaluations" }, h("tr", {}, ["split", "example", "score", "output", "feedback"].map((t) => h("th", {}, t))), evalRows));
}

async function steer(jobId, action) {
  try { await api(`/api/jobs/${encodeURIComponent(jobId)}/${action}?wait=10`, { method: "POST" }); }
  catch (error) { document.getElementById("status").textContent = error.message; }
  route();
}

function controls(job) {
  const live = LIVE.includes(job.state);
  return h("div", { class: "controls" },
    h("button", { id: "pause", disabled: job.state !== "running" || null, onclick: () => steer(job.id, "pause") }, "Pause"),
    " ", h("button", { id: "resume", disabled: !["paused", "created", "queued"].includes(job.state) && !job.stale || null, onclick: () => steer(job.id, "resume") }, "Resume"),
    " ", h("button", { id: "cancel", disabled: !(live || job.state === "paused") || null, onclick: () => steer(job.id, "cancel") }, "Cancel"));
}

function usageTable(usage) {
  const rows = Object.entries(usage || {}).map(([role, u]) => h("tr", {}, h("td", {}, role),
    h("td", {}, u.calls ?? "–"), h("td", {}, u.prompt_tokens ?? "–"), h("td", {}, u.completion_tokens ?? "–")));
  return rows.length ? h("table", { id: "usage" }, h("tr", {}, ["role", "calls", "prompt tokens", "completion tokens"].map((t) => h("th", {}, t))), rows)
    : h("p", { class: "muted" }, "no LM usage yet");
}

// The cost front of a finished job with [job] objectives / select: the front members (and
// the winner and the search's best), their val score and mean cost per example.
function frontCard(front) {
  if (!front) return [];
  const keep = new Set([front.winner_id, front.best_score_id]);
  const tokens = (m) => Object.values(m.cost.tokens_by_role || {}).reduce((a, b) => a + b, 0);
  const members = front.candidates.filter((m) => m.on_front || keep.has(m.candidate_id))
    .sort((a, b) => tokens(a) - tokens(b) || b.score - a.score);
  const note = (m) => [m.candidate_id === front.winner_id ? "chosen" : null,
    m.candidate_id === front.best_score_id ? "best score" : null,
    m.on_front ? null : "not on the front"].filter(Boolean).join(", ");
  const rows = members.map((m) => h("tr", { "data-front": m.candidate_id, class: m.candidate_id === front.winner_id ? "selected" : null },
    h("td", {}, short(m.candidate_id)), h("td", {}, pct(m.score)), h("td", {}, tokens(m).toFixed(0)),
    h("td", {}, m.cost.lm_calls.toFixed(2)), h("td", {}, m.cost.latency_s.toFixed(2)), h("td", {}, note(m))));
  return [h("h2", {}, `Front over ${front.objectives.join(", ")} (val, per example)`),
    h("p", { class: "muted" }, `select ${front.select}: chose ${short(front.winner_id)}`),
    h("table", { id: "front" }, h("tr", {}, ["candidate", "val", "tokens", "LM calls", "seconds", ""].map((t) => h("th", {}, t))), rows)];
}

// The algorithm's plan (its *.plan event, as the CLI prints it), else what bounds the run.
function planCard(job) {
  const plan = job.plan;
  if (!plan) {
    const limits = Object.entries(job.budget.limits).map(([k, v]) => `${k} ${v}`).join(", ");
    return [h("h2", {}, "Plan"), h("p", { class: "muted" },
      `No plan recorded: ${job.algorithm} runs until its budget${limits ? ` (${limits})` : ""} is spent.`)];
  }
  const rows = Object.entries(plan.figures).map(([key, value]) =>
    h("tr", {}, h("td", {}, key), h("td", {}, value === null ? "–" : String(value))));
  return [h("h2", {}, "Plan"), h("p", { class: "summary" }, plan.summary || plan.kind),
    plan.notes.length ? h("ul", { class: "notes" }, plan.notes.map((n) => h("li", {}, n))) : null,
    h("details", { open: "" }, h("summary", {}, `${plan.kind} figures`), h("table", { class: "figures" }, rows))];
}

async function jobPage(token, jobId) {
  const base = `/api/jobs/${encodeURIComponent(jobId)}`;
  const [job, cands, ev] = await Promise.all([api(base), api(`${base}/candidates`), api(`${base}/events?limit=5000`)]);
  if (token !== pageToken) return;
  const events = ev.events;
  const chart = h("div", { class: "chart card", id: "chart" });
  const training = h("div", { class: "chart card", id: "training", hidden: "" });
  const panel = h("div", { class: "card", id: "candidate" }, h("p", { class: "muted" }, "Select a candidate."));
  const select = (id) => {
    for (const row of document.querySelectorAll("tr[data-candidate]")) row.classList.toggle("selected", row.dataset.candidate === id);
    candidatePanel(job.id, id, panel).catch((e) => panel.replaceChildren(h("p", { class: "error-box" }, e.message)));
  };
  const planBox = h("div", { class: "card", id: "plan" }, ...planCard(job));
  const approvalsBox = h("div", { class: "card", id: "approvals", hidden: "" });
  const showApprovals = () => window.emeryApprovals.fill(approvalsBox, job.id, showApprovals)
    .catch((e) => approvalsBox.replaceChildren(h("p", { class: "error-box" }, e.message)));
  const eventList = h("table", { id: "events" });
  const showEvents = () => eventList.replaceChildren(...events.slice(-40).reverse().map((e) =>
    h("tr", {}, h("td", { class: "muted" }, e.seq), h("td", {}, e.kind), h("td", {}, JSON.stringify(e.data).slice(0, 160)))));
  document.getElementById("view").replaceChildren(
    h("h1", {}, `${job.name} `, state(job.state)),
    h("div", { class: "facts" }, h("span", {}, "algorithm", h("b", {}, job.algorithm)),
      h("span", {}, "baseline (val)", h("b", {}, pct(job.baseline_score))),
      h("span", {}, "best (val)", h("b", { id: "best" }, pct(job.best_score))),
      h("span", {}, "budget", h("b", {}, budgetBar(job))), controls(job)),
    h("p", { class: "error-box" }, job.error || ""), approvalsBox, planBox,
    h("div", { class: "grid" },
      h("div", {}, h("h2", {}, "Score over metric calls"), chart, training,
        h("h2", {}, "Candidates"), h("table", { id: "candidates" },
          h("tr", {}, ["lineage", "operation", "val", "train", "test"].map((t) => h("th", {}, t))),
          lineageRows(cands.candidates, cands.best_candidate_id, select)),
        h("h2", {}, "Events"), eventList),
      h("div", {}, panel, ...frontCard(job.result && job.result.front), h("h2", {}, "LM usage by role"), usageTable(job.usage),
        h("h2", {}, "Config"), h("pre", { id: "config" }, JSON.stringify(job.config, null, 2)))));
  window.emeryChart.drawChart(chart, events);
  window.emeryChart.drawTraining(training, events);
  showEvents();
  showApprovals();
  if (LIVE.includes(job.state) || job.state === "paused") {
    follow(job.id, (event) => {
      if (token !== pageToken || events.some((e) => e.seq === event.seq)) return;
      events.push(event);
      if (event.kind.startsWith("approval_")) showApprovals();
      if (event.kind.endsWith(".plan")) {
        api(base).then((fresh) => token === pageToken && planBox.replaceChildren(...planCard(fresh)));
      }
      window.emeryChart.drawChart(chart, events);
      window.emeryChart.drawTraining(training, events);
      showEvents();
    }, () => token === pageToken && route());
  }
}

// --- workers page ----------------------------------------------------------------------
// The runners that joined the store (emery runner): status, host, concurrency, last
// heartbeat, rollouts done and failed, the job of the rollouts they hold; refreshed every 2 s.
async function workersPage(token) {
  const answer = await api("/api/workers");
  if (token !== pageToken) return;
  const ago = (at) => (at ? `${Math.max(0, Math.round((Date.now() - new Date(at).getTime()) / 1000))} s ago` : "–");
  const rows = answer.workers.map((w) => h("tr", { "data-worker": w.id },
    h("td", {}, w.id), h("td", {}, state(w.status)), h("td", {}, w.host || "–"),
    h("td", {}, w.metadata && w.metadata.concurrency !== undefined ? w.metadata.concurrency : "–"),
    h("td", {}, ago(w.heartbeat_at)), h("td", {}, w.rollouts_done), h("td", {}, w.rollouts_failed),
    h("td", {}, w.job_id ? h("a", { href: `#/jobs/${w.job_id}` }, w.job_id) : "–")));
  document.getElementById("view").replaceChildren(
    h("h1", {}, `Workers (${answer.workers.length})`),
    answer.workers.length ? h("table", { id: "workers" }, h("tr", {}, ["id", "status", "host", "concurrency",
      "heartbeat", "done", "failed", "job"].map((t) => h("th", {}, t))), rows)
      : h("p", { class: "muted" }, "No runner has joined this store (emery runner --store ... or --server ... starts one)."));
  setTimeout(() => token === pageToken && workersPage(token).catch(() => {}), 2000);
}

// --- prompts pages ---------------------------------------------------------------------
// The published prompts (emery publish), and one prompt's versions on live traffic
// (/systems/NAME/run): runs, feedback, an alias's scorer and its shadow against what served.
async function promptsPage(token) {
  const answer = await api("/api/prompts");
  if (token !== pageToken) return;
  const rows = answer.prompts.map((p) => h("tr", { "data-prompt": p.name, class: "clickable",
      onclick: () => { location.hash = `#/prompts/${encodeURIComponent(p.name)}`; } },
    h("td", {}, h("a", { href: `#/prompts/${encodeURIComponent(p.name)}` }, p.name)), h("td", {}, p.version),
    h("td", {}, h("a", { href: `#/jobs/${p.job_id}` }, p.job_id)), h("td", {}, pct(p.scores.test))));
  document.getElementById("view").replaceChildren(
    h("h1", {}, `Published prompts (${answer.prompts.length})`),
    answer.prompts.length ? h("table", { id: "prompts" }, h("tr", {}, ["name", "latest version", "job", "test"]
      .map((t) => h("th", {}, t))), rows)
      : h("p", { class: "muted" }, "Nothing published yet (emery publish JOB --name NAME)."));
}

const interval = (mean, low, high) => (mean === null || mean === undefined ? "–"
  : `${pct(mean)}${low === null || low === undefined ? "" : ` [${pct(low)}, ${pct(high)}]`}`);
const signed = (v) => `${v >= 0 ? "+" : ""}${(v * 100).toFixed(1)}`;

async function promptPage(token, name) {
  const answer = await api(`/api/prompts/${encodeURIComponent(name)}/scores`);
  if (token !== pageToken) return;
  const rows = answer.versions.map((v) => {
    const against = v.against_served;
    return h("tr", { "data-version": `${v.version}${v.shadow ? "-shadow" : ""}` },
      h("td", {}, v.shadow ? `${v.version} (shadow)` : String(v.version)), h("td", {}, v.runs), h("td", {}, v.failed),
      h("td", {}, v.rated), h("td", {}, interval(v.mean, v.low, v.high)), h("td", {}, v.scored),
      h("td", {}, interval(v.score, v.score_low, v.score_high)),
      h("td", {}, against ? `${signed(against.difference)} [${signed(against.low)}, ${signed(against.high)}] points, n=${against.n}` : "–"),
      h("td", {}, v.same_output === null || v.same_output === undefined ? "–" : pct(v.same_output)));
  });
  document.getElementById("view").replaceChildren(
    h("h1", {}, `${name}: live traffic`),
    answer.versions.length ? h("table", { id: "versions" }, h("tr", {}, ["version", "runs", "failed", "rated",
      "feedback (95%)", "scored", "score (95%)", "shadow − served (95%)", "same output"].map((t) => h("th", {}, t))), rows)
      : h("p", { class: "muted" }, `No run of ${name} served yet (POST /systems/${name}/run).`));
  setTimeout(() => token === pageToken && promptPage(token, name).catch(() => {}), 5000);
}

// --- rollout page ----------------------------------------------------------------------
function spanNode(span, details) {
  const error = span.status === "error";
  const label = h("div", { class: `span${error ? " error" : ""}`, "data-span": span.name,
      onclick: (event) => { event.stopPropagation(); spanDetails(span, details); } },
    h("span", { class: "dur" }, `${(span.duration_s * 1000).toFixed(0)} ms`), span.name);
  return h("li", {}, label, span.children.length ? h("ul", {}, span.children.map((c) => spanNode(c, details))) : null);
}

function spanDetails(span, box) {
  const parse = (text) => { try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; } };
  const a = span.attributes;
  const parts = [h("h2", {}, span.name), h("p", { class: "muted" }, `${span.status}${span.status_message ? `: ${span.status_message}` : ""} · ${span.start_time}`)];
  if (a["gen_ai.input.messages"]) parts.push(h("h3", {}, "Messages"), h("pre", { id: "messages" }, parse(a["gen_ai.input.messages"])));
  if (a["gen_ai.output.messages"]) parts.push(h("h3", {}, "Reply"), h("pre", { id: "reply" }, parse(a["gen_ai.output.messages"])));
  for (const e of span.events) parts.push(h("h3", {}, `event: ${e.name}`), h("pre", {}, JSON.stringify(e.attributes, null, 2)));
  parts.push(h("h3", {}, "Attributes"), h("pre", {}, JSON.stringify(a, null, 2)));
  box.replaceChildren(...parts);
}

async function rolloutPage(token, rolloutId) {
  const base = `/api/rollouts/${encodeURIComponent(rolloutId)}`;
  const [rollout, spans] = await Promise.all([api(base), api(`${base}/spans`)]);
  if (token !== pageToken) return;
  const details = h("div", { class: "card", id: "span-details" }, h("p", { class: "muted" }, "Click a span."));
  document.getElementById("view").replaceChildren(
    h("h1", {}, `Rollout ${rollout.id} `, state(rollout.status)),
    h("p", {}, h("a", { href: `#/jobs/${rollout.job_id}` }, `job ${rollout.job_id}`),
      ` · candidate ${short(rollout.candidate_id)} · ${rollout.split} example ${rollout.example_id} · score ${pct(rollout.score)} · attempts ${rollout.attempts.length}`),
    h("div", { class: "grid" },
      h("div", {}, h("h2", {}, "Input"), h("pre", {}, JSON.stringify(rollout.input, null, 2)),
        h("h2", {}, "Output"), h("pre", {}, JSON.stringify(rollout.output, null, 2)),
        h("h2", {}, `Trace (${spans.count} spans)`),
        h("div", { class: "tree", id: "trace" }, h("ul", {}, spans.spans.map((s) => spanNode(s, details))))),
      details));
}

async function route() {
  pageToken += 1;
  const token = pageToken;
  closeStreams();
  const hash = location.hash || "#/";
  const job = hash.match(/^#\/jobs\/([^/]+)$/), rollout = hash.match(/^#\/rollouts\/([^/]+)$/);
  const prompt = hash.match(/^#\/prompts\/([^/]+)$/);
  const workers = hash === "#/workers", prompts = hash === "#/prompts";
  document.getElementById("where").textContent = job ? `job ${decodeURIComponent(job[1])}` : rollout ? "rollout"
    : workers ? "workers" : prompt ? `prompt ${decodeURIComponent(prompt[1])}` : prompts ? "prompts" : "jobs";
  try {
    if (job) await jobPage(token, decodeURIComponent(job[1]));
    else if (rollout) await rolloutPage(token, decodeURIComponent(rollout[1]));
    else if (workers) await workersPage(token);
    else if (prompt) await promptPage(token, decodeURIComponent(prompt[1]));
    else if (prompts) await promptsPage(token);
    else await jobsPage(token);
  } catch (error) {
    document.getElementById("view").replaceChildren(h("p", { class: "error-box" }, error.message));
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);
