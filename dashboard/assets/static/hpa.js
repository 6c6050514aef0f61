// skiff dashboard: the autoscaler view (loaded before app.js, whose
// helpers h, t, fill, keyOf and store it uses when called).
//
// Per HorizontalPodAutoscaler: each pod's metric value over time (GPU
// utilisation from the DCGM exporter through the custom metrics API, cpu
// in percent of the request, ...) against the target, and the replica
// count over time, every sync a point and every rescale marked; hovering
// a point or a mark shows the decision's steps with their inputs, and the
// list under the plots has them all. The data is api/hpa/NS/NAME: the
// decisions the controller posted to the autoscaler's trace after each
// sync (dashboard/hpa.go), one sample per sync. Plain SVG, no library.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const HPA_COLORS = ["#4cc2ff", "#5bd48a", "#ffc857", "#ff6b6b", "#c792ea", "#f78c6c", "#89ddff", "#c3e88d", "#ff9cac", "#b2ccd6"];

// sv builds an SVG element, as h does an HTML one.
function sv(tag, attrs, ...children) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const fmtNum = (v) => (Math.abs(v) >= 100 || Number.isInteger(v) ? String(Math.round(v * 10) / 10) : v.toPrecision(3));
// A sync rescaled when the controller says so: one whose metrics failed
// keeps the status's old desired count without rescaling.
const rescaled = (d) => !!d.rescaled;
const counts = (d) => (rescaled(d) ? d.currentReplicas + " → " + d.desiredReplicas : String(d.currentReplicas));
const decisionText = (d) => clockOf(d.time) + "  " + counts(d) + "\n" + (d.steps || []).join("\n");
const clockOf = (s) => { const d = new Date(s); return Number.isNaN(d.getTime()) ? "-" : d.toISOString().slice(11, 19); };

// hpaFrame is the geometry of one plot: the time axis of all decisions,
// the value axis 0..top.
function hpaFrame(times, top, height) {
  const W = 960, H = height, L = 56, R = 16, T = 12, B = 28;
  const t0 = Math.min(...times), t1 = Math.max(...times, t0 + 1000);
  return {
    W, H, L, R, T, B, top,
    x: (tm) => L + ((tm - t0) / (t1 - t0)) * (W - L - R),
    y: (v) => T + (1 - Math.min(v, top) / top) * (H - T - B),
    axes(unit) {
      const ticks = [0, top / 2, top];
      return sv("g", { class: "axes" },
        sv("line", { x1: L, y1: T, x2: L, y2: H - B }), sv("line", { x1: L, y1: H - B, x2: W - R, y2: H - B }),
        ticks.map((v) => sv("text", { x: L - 6, y: this.y(v) + 5, "text-anchor": "end" }, fmtNum(v) + unit)),
        sv("text", { x: L, y: H - 6 }, clockOf(new Date(t0).toISOString())),
        sv("text", { x: W - R, y: H - 6, "text-anchor": "end" }, clockOf(new Date(t1).toISOString())));
    },
  };
}

// hpaMarks: a vertical line at each rescale, hovering says why.
function hpaMarks(f, ds, times) {
  return ds.map((d, i) => rescaled(d) ? sv("line", { class: "mark " + (d.desiredReplicas > d.currentReplicas ? "up" : "down"), x1: f.x(times[i]), x2: f.x(times[i]), y1: f.T, y2: f.H - f.B },
    sv("title", {}, decisionText(d))) : null);
}

// metricPlot: one metric's per-pod values at each sync that read it.
function metricPlot(name, ds, times, colorOf) {
  const series = new Map(); // pod → [[time, value, decision]]
  let top = 0, target = 0, unit = "";
  ds.forEach((d, i) => {
    const m = (d.metrics || []).find((x) => x.metric === name);
    if (!m) return;
    target = m.target; unit = m.unit || "";
    top = Math.max(top, m.target, m.current);
    for (const [pod, v] of Object.entries(m.pods || {})) {
      if (!series.has(pod)) series.set(pod, []);
      series.get(pod).push([times[i], v, d]);
      top = Math.max(top, v);
    }
  });
  const f = hpaFrame(times, (top || 1) * 1.15, 280);
  const pods = [...series.keys()].sort();
  const lines = pods.map((pod) => {
    const pts = series.get(pod);
    const color = colorOf(pod);
    return sv("g", { class: "series", "data-series": pod },
      pts.length > 1 ? sv("polyline", { fill: "none", stroke: color, "stroke-width": 2, points: pts.map(([tm, v]) => f.x(tm) + "," + f.y(v)).join(" ") }) : null,
      pts.map(([tm, v, d]) => sv("circle", { cx: f.x(tm), cy: f.y(v), r: 4, fill: color, "data-point": pod, "data-value": v },
        sv("title", {}, pod + ": " + fmtNum(v) + unit + " at " + clockOf(d.time) + "\n" + decisionText(d)))));
  });
  return h("div", { class: "panel plot" },
    h("h2", {}, name, h("span", { class: "dim" }, "  " + t("hpa.target") + " " + fmtNum(target) + unit)),
    sv("svg", { viewBox: `0 0 ${f.W} ${f.H}`, class: "chart", "data-plot": "metric", "data-metric": name, role: "img", "aria-label": name },
      f.axes(unit),
      sv("line", { class: "target", x1: f.L, x2: f.W - f.R, y1: f.y(target), y2: f.y(target) }, sv("title", {}, t("hpa.target") + " " + fmtNum(target) + unit)),
      hpaMarks(f, ds, times), lines),
    // The page's Content-Security-Policy allows no inline style: the
    // legend's colour is an SVG fill, as the plot's.
    h("div", { class: "legend" }, pods.map((pod) => h("span", { "data-legend": pod },
      sv("svg", { width: 14, height: 14, viewBox: "0 0 14 14" }, sv("circle", { cx: 7, cy: 7, r: 6, fill: colorOf(pod) })), " " + pod))));
}

// replicaPlot: the replica count at each sync and after each rescale,
// min and max dashed, each rescale marked ▲ or ▼.
function replicaPlot(hpa, ds, times) {
  const maxR = hpa.spec?.maxReplicas || 1, minR = hpa.spec?.minReplicas ?? 1;
  const top = Math.max(maxR, ...ds.map((d) => Math.max(d.currentReplicas, rescaled(d) ? d.desiredReplicas : 0))) + 1;
  const f = hpaFrame(times, top, 220);
  const steps = [];
  ds.forEach((d, i) => {
    if (steps.length) steps.push([times[i], steps[steps.length - 1][1]]);
    steps.push([times[i], d.currentReplicas]);
    if (rescaled(d)) steps.push([times[i], d.desiredReplicas]);
  });
  return h("div", { class: "panel plot" },
    h("h2", {}, t("hpa.replicas"), h("span", { class: "dim" }, "  min " + minR + " · max " + maxR)),
    sv("svg", { viewBox: `0 0 ${f.W} ${f.H}`, class: "chart", "data-plot": "replicas", role: "img", "aria-label": t("hpa.replicas") },
      f.axes(""),
      [minR, maxR].map((v) => sv("line", { class: "target", x1: f.L, x2: f.W - f.R, y1: f.y(v), y2: f.y(v) })),
      hpaMarks(f, ds, times),
      sv("polyline", { fill: "none", stroke: "#e8edf2", "stroke-width": 2, points: steps.map(([tm, v]) => f.x(tm) + "," + f.y(v)).join(" ") }),
      ds.map((d, i) => sv("circle", { cx: f.x(times[i]), cy: f.y(d.currentReplicas), r: 3.5, fill: "#e8edf2", "data-replicas": d.currentReplicas },
        sv("title", {}, decisionText(d)))),
      ds.map((d, i) => {
        if (!rescaled(d)) return null;
        const x = f.x(times[i]), y = f.y(d.desiredReplicas), up = d.desiredReplicas > d.currentReplicas;
        const tri = up ? `${x},${y - 9} ${x - 8},${y + 6} ${x + 8},${y + 6}` : `${x},${y + 9} ${x - 8},${y - 6} ${x + 8},${y - 6}`;
        return sv("polygon", { points: tri, class: "decision " + (up ? "up" : "down"), tabindex: 0, "data-decision-mark": i, "data-from": d.currentReplicas, "data-to": d.desiredReplicas }, sv("title", {}, decisionText(d)));
      })));
}

// renderHPA draws the view of one autoscaler's data (api/hpa/NS/NAME).
function renderHPA(root, v) {
  const hpa = v.hpa, ds = v.decisions || [];
  const key = keyOf(hpa);
  const ref = hpa.spec?.scaleTargetRef || {};
  const head = [h("h1", {}, "HorizontalPodAutoscaler " + key),
    h("p", {}, ref.kind + "/" + ref.name, " · ", t("hpa.current") + " " + (hpa.status?.currentReplicas ?? "-"), " · ", t("hpa.desired") + " " + (hpa.status?.desiredReplicas ?? "-"),
      " · ", h("span", { class: "dim" }, "kubectl describe hpa " + hpa.metadata.name + " -n " + hpa.metadata.namespace + " · skiff trace hpa/" + hpa.metadata.name))];
  if (!ds.length) { fill(root, head, h("p", { class: "dim", id: "hpa-empty" }, t("hpa.none"))); return; }
  const times = ds.map((d) => Date.parse(d.time));
  const names = [];
  for (const d of ds) for (const m of d.metrics || []) if (!names.includes(m.metric)) names.push(m.metric);
  const colors = new Map();
  const colorOf = (pod) => { if (!colors.has(pod)) colors.set(pod, HPA_COLORS[colors.size % HPA_COLORS.length]); return colors.get(pod); };
  const list = h("div", { id: "decisions" }, ds.map((d, i) => h("div", { class: "decision-line" + (rescaled(d) ? " rescale" : ""), "data-decision": i, "data-rescale": String(rescaled(d)) },
    h("span", { class: "mono" }, clockOf(d.time)), " ", h("b", {}, counts(d)),
    h("pre", {}, (d.steps || []).join("\n")))).reverse());
  fill(root, head,
    names.map((n) => metricPlot(n, ds, times, colorOf)),
    names.length ? null : h("p", { class: "dim" }, t("hpa.nometrics")),
    replicaPlot(hpa, ds, times),
    h("h2", {}, t("hpa.decisions") + " (" + ds.length + ")"),
    h("label", {}, h("input", { type: "checkbox", id: "rescales-only", onchange: (e) => list.classList.toggle("rescales-only", e.target.checked) }), " " + t("hpa.rescalesOnly")),
    list);
}

// hpaPicker lists the autoscalers the live stream knows.
function hpaPicker(root) {
  const hpas = [...(store.get("horizontalpodautoscalers")?.values() || [])].sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
  fill(root, h("h1", {}, t("nav.hpa")),
    hpas.length ? hpas.map((o) => h("div", { class: "pod", "data-hpa": keyOf(o) }, h("a", { href: "#/hpa/" + keyOf(o) }, keyOf(o)), " ",
      h("span", { class: "dim" }, (o.spec?.scaleTargetRef?.kind || "") + "/" + (o.spec?.scaleTargetRef?.name || "") + " · " + (o.status?.currentReplicas ?? 0) + " replicas")))
      : h("p", { class: "dim" }, t("hpa.nohpas")));
}
