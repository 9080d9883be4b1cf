// The deltaflow dashboard: draws the job's graph once (/api/graph) and polls its live state
// (/api/stats) every second. Plain DOM and SVG; text goes in with textContent only.
"use strict";

const POLL_MS = 1000;
const SVG = "http://www.w3.org/2000/svg";
const token = new URLSearchParams(location.search).get("token");
const edgeLabels = [];   // one <text> per edge, in /api/graph's order
const edgePaths = [];
const nodeStats = [];    // one <text> per box, for its arranged updates

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
  const pad = 20, statH = 16;
  const svg = el("svg", {
    width: g.width + 2 * pad, height: g.height + 2 * pad + statH + 30,
    viewBox: `${-pad} ${-pad} ${g.width + 2 * pad} ${g.height + 2 * pad + statH + 30}`,
  });
  const defs = el("defs");
  const marker = el("marker", {
    id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse",
  });
  marker.append(el("path", { d: "M 0 0 L 10 5 L 0 10 z" }));
  defs.append(marker);
  svg.append(defs);
  const nodes = g.nodes;
  const edgeGroup = el("g", { class: "edges" });
  svg.append(edgeGroup);
  for (const e of g.edges) {
    const a = nodes[e.source], b = nodes[e.target];
    let d, lx, ly;
    if (b.x > a.x) {
      const x1 = a.x + a.w, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2;
      const mx = (x1 + x2) / 2;
      d = `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`;
      lx = mx; ly = (y1 + y2) / 2 - 4;
    } else {  // a loop's feedback: around, below the boxes
      const x1 = a.x + a.w / 2, y1 = a.y + a.h, x2 = b.x + b.w / 2, y2 = b.y + b.h;
      const low = Math.max(y1, y2) + 30;
      d = `M ${x1} ${y1} C ${x1} ${low}, ${x2} ${low}, ${x2} ${y2}`;
      lx = (x1 + x2) / 2; ly = low - 4;
    }
    const path = el("path", { d, class: e.exchange ? "edge exchange" : "edge", "marker-end": "url(#arrow)" });
    const title = el("title", {}, e.exchange ? "exchanged by key between workers" : "same worker");
    path.append(title);
    edgeGroup.append(path);
    edgePaths.push(path);
    const label = el("text", { x: lx, y: ly, "text-anchor": "middle", class: "edge-label" }, "");
    edgeGroup.append(label);
    edgeLabels.push(label);
  }
  for (const n of nodes) {
    const first = n.label[0];
    const kind = first.startsWith("input:") ? "input" : first.startsWith("output:") ? "output" : "op";
    const box = el("g", { class: `node ${kind}`, transform: `translate(${n.x},${n.y})` });
    box.append(el("rect", { width: n.w, height: n.h + statH }));
    n.label.forEach((line, i) => box.append(el("text", { x: 8, y: 16 + 16 * i }, line)));
    const stat = el("text", { x: 8, y: 16 + 16 * n.label.length, class: "stat" }, "");
    box.append(stat);
    nodeStats.push(stat);
    svg.append(box);
  }
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
    const shared = e.shared ? " (port total)" : "";
    edgeLabels[i].textContent = e.rate === null ? "" : `${fmt(e.rate)}/s${shared}`;
    edgeLabels[i].setAttribute("data-records", e.records === null ? "" : e.records);
    edgePaths[i].classList.toggle("active", e.rate > 0);
  });
  s.operators.forEach((op, i) => {
    if (!nodeStats[i]) return;
    const parts = [];
    if (op.records !== null && op.records !== undefined) parts.push(`${fmt(op.records)} in`);
    if (op.arranged) parts.push(`${fmt(op.arranged)} arranged`);
    nodeStats[i].textContent = parts.join(" · ");
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
    : cps.slice().reverse().map((c) => [
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
