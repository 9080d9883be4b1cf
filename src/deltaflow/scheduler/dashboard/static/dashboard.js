// The deltaflow dashboard: draws the job's graph once (/api/graph) and polls its live state
// (/api/stats) every second. Plain DOM and SVG; text goes in with textContent only.
"use strict";

const POLL_MS = 1000;
const SVG = "http://www.w3.org/2000/svg";
const token = new URLSearchParams(location.search).get("token");
const edgeLabels = [];   // one <text> per edge, in /api/graph's order
const edgePaths = [];
const nodeStats = [];    // two <text> per box: records in, updates arranged
const hasInputs = [];    // per box: whether any edge comes in (a source's "in" means nothing)

function api(path) {
  const url = token ? `${path}?token=${encodeURIComponent(token)}` : path;
  return fetch(url, { cache: "no-store" }).then((r) => {
    if (!r.ok) throw new Error(`${path}: HTTP ${r.status}`);
    return r.json();
  });
}

function el(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(n) {
  if (n === null || n === undefined) return "-";
  if (typeof n !== "number") return String(n);
  if (Math.abs(n) >= 100 || Number.isInteger(n)) return Math.round(n).toLocaleString("en");
  return n.toFixed(1);
}

function bytes(n) {
  if (n === null || n === undefined) return "unknown";
  const units = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function drawGraph(g) {
  const pad = 20;
  const width = g.width + 2 * pad, height = g.height + 2 * pad + 30;  // room for loops below
  const svg = el("svg", {
    viewBox: `${-pad} ${-pad} ${width} ${height}`, preserveAspectRatio: "xMinYMin meet",
  });
  svg.style.maxWidth = `${width}px`;  // shrinks to fit, never grows past its natural size
  const defs = el("defs");
  const marker = el("marker", {
    id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse",
  });
  marker.append(el("path", { d: "M 0 0 L 10 5 L 0 10 z" }));
  defs.append(marker);
  svg.append(defs);
  const nodes = g.nodes;
  for (const n of nodes) hasInputs[n.id] = g.edges.some((e) => e.target === n.id);
  const edgeGroup = el("g", { class: "edges" });
  const labelGroup = el("g", { class: "labels" });
  svg.append(edgeGroup);
  const labelled = new Set();  // ports whose (shared) count is shown already
  for (const e of g.edges) {
    const a = nodes[e.source], b = nodes[e.target];
    let d, lx, ly;
    if (b.x > a.x) {
      const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2;
      const mx = (x1 + x2) / 2;
      d = `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`;
      // A port fed by several edges: one label, where they meet.
      if (e.shared) { lx = x2 - 6; ly = y2 - 6; } else { lx = mx; ly = (y1 + y2) / 2 - 5; }
    } else {  // a loop's feedback: around, below the boxes
      const x1 = a.x + a.w / 2, y1 = a.y + a.h, x2 = b.x + b.w / 2, y2 = b.y + b.h;
      const low = Math.max(y1, y2) + 30;
      d = `M ${x1} ${y1} C ${x1} ${low}, ${x2} ${low}, ${x2} ${y2}`;
      lx = (x1 + x2) / 2; ly = low - 4;
    }
    const path = el("path", { d, class: e.exchange ? "edge exchange" : "edge", "marker-end": "url(#arrow)" });
    const how = e.exchange ? "exchanged by key between workers" : "on the same worker";
    const title = el("title", {}, e.shared ? `${how}; the rate shown is the target port's, fed by several edges` : how);
    path.append(title);
    edgeGroup.append(path);
    edgePaths.push(path);
    const port = `${e.target}:${e.port}`;
    const anchor = e.shared && b.x > a.x ? "end" : "middle";
    const label = el("text", { x: lx, y: ly, "text-anchor": anchor, class: "edge-label" }, "");
    if (e.shared && labelled.has(port)) label.setAttribute("visibility", "hidden");
    labelled.add(port);
    labelGroup.append(label);
    edgeLabels.push(label);
  }
  for (const n of nodes) {
    const first = n.label[0];
    const kind = first.startsWith("input:") ? "input" : first.startsWith("output:") ? "output" : "op";
    const box = el("g", { class: `node ${kind}`, transform: `translate(${n.x},${n.y})` });
    box.append(el("rect", { width: n.w, height: n.h }));
    n.label.forEach((line, i) => box.append(el("text", { x: 8, y: 16 + 16 * i }, line)));
    const stats = [0, 1].map((k) => el("text", { x: 8, y: 16 + 16 * (n.label.length + k), class: "stat" }, ""));
    box.append(...stats);
    nodeStats.push(stats);
    svg.append(box);
  }
  svg.append(labelGroup);  // over the boxes and edges
  document.getElementById("graph").replaceChildren(svg);
}

function fillTable(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows.map((cells) => {
    const tr = document.createElement("tr");
    for (const c of cells) {
      const td = document.createElement("td");
      td.textContent = c;
      tr.append(td);
    }
    return tr;
  }));
}

function update(s) {
  document.getElementById("pipeline").textContent = s.pipeline;
  document.getElementById("state").textContent = s.state;
  document.getElementById("time").textContent = fmt(s.time);
  document.getElementById("output-rate").textContent = fmt(s.output_rate);
  document.getElementById("elapsed").textContent = `${s.elapsed.toFixed(0)} s`;
  const error = document.getElementById("error");
  error.hidden = !s.error;
  error.textContent = s.error || "";
  s.edges.forEach((e, i) => {
    if (!edgeLabels[i]) return;
    const shared = e.shared ? "Σ " : "";
    edgeLabels[i].textContent = e.rate === null ? "" : `${shared}${fmt(e.rate)}/s`;
    edgeLabels[i].setAttribute("data-records", e.records === null ? "" : e.records);
    edgePaths[i].classList.toggle("active", e.rate > 0);
  });
  s.operators.forEach((op, i) => {
    if (!nodeStats[i]) return;
    const parts = [];
    if (op.records !== null && op.records !== undefined && hasInputs[i]) parts.push(`${fmt(op.records)} in`);
    if (op.arranged) parts.push(`${fmt(op.arranged)} arranged`);
    nodeStats[i].forEach((t, k) => { t.textContent = parts[k] || ""; });
  });
  fillTable("outputs", s.outputs.map((o) => [
    o.name, o.done ? "done" : `{${o.frontier.join(", ")}}`, fmt(o.lag_times),
    o.lag_seconds.toFixed(1), fmt(o.published),
  ]));
  const counters = Object.entries(s.counters);
  fillTable("counters", counters.length ? counters.map(([k, v]) => [k, fmt(v)]) : [["(none yet)", ""]]);
  fillTable("processes", s.processes.map((p) => [
    p.process, p.pid, bytes(p.rss), p.workers.join(", "), fmt(p.arranged),
  ]));
  fillTable("workers", s.workers.map((w) => [
    w.index, w.process, fmt(w.steps), fmt(w.activations),
    fmt(w.arranged.reduce((a, b) => a + b, 0)),
  ]));
  const missing = document.getElementById("missing");
  missing.replaceChildren(...s.missing.map((m) => {
    const li = document.createElement("li");
    li.textContent = m;
    return li;
  }));
  const cps = s.checkpoints;
  fillTable("checkpoints", cps === null ? [["-", "this job keeps no checkpoints", "", "", ""]]
    : cps.length === 0 ? [["-", "none yet", "", "", ""]]
    : cps.slice(-10).reverse().map((c) => [
      c.sequence, c.time === null ? "-" : c.time, new Date(c.at * 1000).toLocaleTimeString(),
      c.seconds.toFixed(3), c.ok ? "ok" : "failed",
    ]));
}

async function poll() {
  try {
    update(await api("api/stats"));
  } catch (err) {
    document.getElementById("state").textContent = "unreachable (the job has ended?)";
  }
  setTimeout(poll, POLL_MS);
}

api("api/graph").then((g) => { drawGraph(g); poll(); }).catch((err) => {
  document.getElementById("state").textContent = `cannot load the graph: ${err.message}`;
});
