// The score chart: points per evaluation over metric calls spent, and the best-so-far line.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svg(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

// Chart points from a job's events: x is the metric calls paid so far (new rollouts);
// val points, minibatch (train) points; test scores are the report's, not the search's.
function chartPoints(events) {
  let calls = 0;
  const points = [];
  for (const event of events) {
    const data = event.data || {};
    const evaluated = event.kind === "baseline_evaluated" || event.kind === "candidate_evaluated";
    if (evaluated && data.split !== "test") {
      calls += data.new_rollouts || 0;
      points.push({ x: calls, score: data.score, split: data.split, id: data.candidate_id,
                    seq: event.seq });
    }
  }
  return points;
}

function bestLine(points) {
  let best = null;
  const line = [];
  for (const point of points) {
    if (point.split !== "val") continue;
    best = best === null ? point.score : Math.max(best, point.score);
    line.push({ x: point.x, score: best });
  }
  return line;
}

// Draws into ``box``; sets data-points (points drawn) and data-last-seq for tests.
function drawChart(box, events) {
  const points = chartPoints(events);
  const width = 640, height = 260, left = 40, bottom = 28, top = 10, right = 10;
  const maxX = Math.max(1, ...points.map((p) => p.x));
  const sx = (x) => left + (x / maxX) * (width - left - right);
  const sy = (s) => top + (1 - s) * (height - top - bottom);
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img",
                            "aria-label": "score over metric calls" });
  root.append(svg("line", { x1: left, y1: sy(0), x2: width - right, y2: sy(0), class: "axis" }));
  root.append(svg("line", { x1: left, y1: sy(0), x2: left, y2: sy(1), class: "axis" }));
  for (const tick of [0, 0.5, 1]) {
    const label = svg("text", { x: 4, y: sy(tick) + 4 });
    label.textContent = `${Math.round(tick * 100)}%`;
    root.append(label);
  }
  const xLabel = svg("text", { x: width - right - 120, y: height - 6 });
  xLabel.textContent = `metric calls (${maxX})`;
  root.append(xLabel);
  const line = bestLine(points);
  if (line.length) {
    const path = line.map((p, i) => `${i ? "L" : "M"}${sx(p.x)},${sy(p.score)}`).join(" ");
    root.append(svg("path", { d: `${path} H${sx(maxX)}`, fill: "none", stroke: "#1f8a4c",
                              "stroke-width": 2, class: "best-line" }));
  }
  for (const p of points) {
    const val = p.split === "val";
    const dot = svg("circle", { cx: sx(p.x), cy: sy(p.score), r: val ? 4 : 2.5,
      fill: val ? "#2f6fdb" : "none", stroke: "#2f6fdb", class: `point ${p.split}` });
    const title = svg("title");
    title.textContent = `${p.split} ${(p.score * 100).toFixed(1)}% · ${p.id.slice(0, 8)}`;
    dot.append(title);
    root.append(dot);
  }
  box.replaceChildren(root);
  box.dataset.points = String(points.length);
  box.dataset.lastSeq = String(events.length ? events[events.length - 1].seq : 0);
}

// An SFT or RL job's curves over training steps: train and val loss (SFT) and the mean
// reward (RL), each series scaled to its own range; the last KL an RL step reported.
const TRAINING = { train_loss: ["loss", "#1f78b4"], val_loss: ["loss", "#d98c00"], train_reward: ["reward", "#1f8a4c"] };

function trainingSeries(events) {
  const series = {};
  let kl = null;
  for (const event of events) {
    const spec = TRAINING[event.kind];
    const data = event.data || {};
    if (!spec || typeof data[spec[0]] !== "number" || typeof data.step !== "number") continue;
    (series[event.kind] = series[event.kind] || []).push({ step: data.step, value: data[spec[0]] });
    if (typeof data.kl === "number") kl = data.kl;
  }
  return { series, kl };
}

// Draws into ``box`` (nothing when the job reported no curve); data-steps and
// data-series tell tests what was drawn.
function drawTraining(box, events) {
  const { series, kl } = trainingSeries(events);
  const kinds = Object.keys(series);
  box.hidden = kinds.length === 0;
  if (!kinds.length) return;
  const width = 640, height = 220, left = 50, bottom = 28, top = 10, right = 10;
  const steps = Math.max(1, ...kinds.flatMap((k) => series[k].map((p) => p.step)));
  const sx = (x) => left + (x / steps) * (width - left - right);
  const root = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "training curves" });
  root.append(svg("line", { x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, class: "axis" }));
  const legend = [];
  for (const kind of kinds) {
    const points = series[kind];
    const values = points.map((p) => p.value);
    const low = Math.min(...values), high = Math.max(...values), span = high - low || 1;
    const sy = (v) => top + (1 - (v - low) / span) * (height - top - bottom);
    const path = points.map((p, i) => `${i ? "L" : "M"}${sx(p.step)},${sy(p.value)}`).join(" ");
    root.append(svg("path", { d: path, fill: "none", stroke: TRAINING[kind][1], "stroke-width": 2, class: `curve ${kind}` }));
    for (const p of points) root.append(svg("circle", { cx: sx(p.step), cy: sy(p.value), r: 3, fill: TRAINING[kind][1] }));
    legend.push(`${kind} ${values[values.length - 1].toPrecision(3)} (${low.toPrecision(3)}–${high.toPrecision(3)})`);
  }
  const xLabel = svg("text", { x: width - right - 80, y: height - 6 });
  xLabel.textContent = `step ${steps}`;
  root.append(xLabel);
  const title = document.createElement("h3");
  title.textContent = "Training over steps";
  const caption = document.createElement("p");
  caption.className = "muted";
  caption.textContent = legend.join(" · ") + (kl === null ? "" : ` · KL ${kl.toPrecision(3)}`);
  box.replaceChildren(title, root, caption);
  box.dataset.steps = String(steps);
  box.dataset.series = kinds.join(",");
}

window.emeryChart = { drawChart, chartPoints, drawTraining, trainingSeries };
