// Hand-drawn SVG charts (no chart library): stacked bars over time, horizontal bars, and
// two lines over time on two scales (a metric and a count).

const NS = "http://www.w3.org/2000/svg";
/** A fixed palette, readable on white. */
export const COLORS = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2", "#65a30d", "#db2777", "#4b5563", "#7c3aed"];

/** A tick value with as many digits as the scale needs (0.0003 stays 0.0003, not 0.0). */
export function tick(v, max) {
  if (v === 0) return "0";
  if (max >= 10) return v.toFixed(0);
  const digits = Math.min(6, Math.max(1, 1 - Math.floor(Math.log10(max / 4))));
  return v.toFixed(digits);
}

function s(tag, attrs = {}, text) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

/**
 * Stacked bars: `buckets` is [{label, values: Map(series -> number)}], `series` the
 * names in stacking order. Returns an <svg> with a legend.
 */
export function stackedBars(buckets, series, { unit = "", height = 220 } = {}) {
  const width = Math.max(480, buckets.length * 28 + 60);
  const top = 24, bottom = 40, left = 64;
  const max = Math.max(1e-9, ...buckets.map((b) => [...b.values.values()].reduce((a, x) => a + x, 0)));
  const plotH = height - top - bottom;
  const bw = (width - left - 10) / Math.max(1, buckets.length);
  const svg = s("svg", { width, height: height + 20 * Math.ceil(series.length / 6), role: "img" });
  for (let i = 0; i <= 4; i++) {
    const y = top + plotH - (plotH * i) / 4;
    svg.append(s("line", { x1: left, x2: width - 10, y1: y, y2: y, stroke: "#e5e7eb" }));
    svg.append(s("text", { x: left - 4, y: y + 4, "text-anchor": "end" }, tick((max * i) / 4, max)));
  }
  buckets.forEach((b, i) => {
    let y = top + plotH;
    series.forEach((name, k) => {
      const v = b.values.get(name) || 0;
      if (!v) return;
      const hgt = (v / max) * plotH;
      y -= hgt;
      const r = s("rect", { x: left + i * bw + 2, y, width: Math.max(1, bw - 4), height: hgt, fill: COLORS[k % COLORS.length] });
      r.append(s("title", {}, `${b.label} ${name}: ${tick(v, v)} ${unit}`));
      svg.append(r);
    });
    if (buckets.length <= 16 || i % Math.ceil(buckets.length / 16) === 0) {
      svg.append(s("text", { x: left + i * bw + bw / 2, y: top + plotH + 14, "text-anchor": "middle" }, b.label));
    }
  });
  svg.append(s("text", { x: 4, y: 12 }, unit));
  series.forEach((name, k) => {
    const x = left + (k % 6) * 130, y = height + 20 * Math.floor(k / 6) - 4;
    svg.append(s("rect", { x, y: y - 9, width: 10, height: 10, fill: COLORS[k % COLORS.length] }));
    svg.append(s("text", { x: x + 14, y }, name));
  });
  return svg;
}

/** Horizontal bars: rows of {label, value, note}; bars scaled to the largest value. */
export function hBars(rows, { width = 540 } = {}) {
  const rowH = 22, left = 120;
  const max = Math.max(1e-9, ...rows.map((r) => r.value));
  const svg = s("svg", { width, height: rows.length * rowH + 4, role: "img" });
  rows.forEach((r, i) => {
    const y = i * rowH + 2;
    svg.append(s("text", { x: left - 6, y: y + 14, "text-anchor": "end" }, r.label));
    const w = ((width - left - 180) * r.value) / max;
    svg.append(s("rect", { x: left, y: y + 3, width: Math.max(1, w), height: rowH - 8, fill: COLORS[i % COLORS.length] }));
    svg.append(s("text", { x: left + w + 6, y: y + 14 }, r.note));
  });
  return svg;
}

/**
 * Two lines over time, each on its own scale: `points` is [{t, a, b}] oldest first (t in
 * ms); `a` {name, unit} is drawn on the left scale, `b` {name, max} as steps on the right
 * (a count: integer ticks up to `b.max` or its largest value). Returns an <svg> with a
 * legend; each point has a tooltip.
 */
export function twoLines(points, a, b, { width = 540, height = 170 } = {}) {
  const top = 12, bottom = 36, left = 56, right = 40;
  const plotW = width - left - right, plotH = height - top - bottom;
  const maxA = Math.max(1e-9, ...points.map((p) => p.a));
  const maxB = Math.max(1, b.max || 0, ...points.map((p) => p.b));
  const t0 = points.length ? points[0].t : 0;
  const span = Math.max(1, points.length ? points[points.length - 1].t - t0 : 1);
  const x = (t) => left + (points.length > 1 ? ((t - t0) / span) * plotW : plotW / 2);
  const yA = (v) => top + plotH - (v / maxA) * plotH;
  const yB = (v) => top + plotH - (v / maxB) * plotH;
  const svg = s("svg", { width, height: height + 18, role: "img" });
  for (let i = 0; i <= 4; i++) {
    const y = top + plotH - (plotH * i) / 4;
    svg.append(s("line", { x1: left, x2: width - right, y1: y, y2: y, stroke: "#e5e7eb" }));
    svg.append(s("text", { x: left - 4, y: y + 4, "text-anchor": "end" }, tick((maxA * i) / 4, maxA)));
  }
  const step = Math.max(1, Math.ceil(maxB / 4));
  for (let v = 0; v <= maxB; v += step) {
    svg.append(s("text", { x: width - right + 4, y: yB(v) + 4 }, String(v)));
  }
  if (points.length) {
    const time = (t) => new Date(t).toLocaleTimeString();
    svg.append(s("text", { x: left, y: top + plotH + 14 }, time(t0)));
    if (points.length > 1) {
      svg.append(s("text", { x: width - right, y: top + plotH + 14, "text-anchor": "end" }, time(t0 + span)));
    }
    const lineA = points.map((p) => `${x(p.t)},${yA(p.a)}`).join(" ");
    const lineB = points.map((p, i) => (i ? `${x(p.t)},${yB(points[i - 1].b)} ` : "") + `${x(p.t)},${yB(p.b)}`).join(" ");
    svg.append(s("polyline", { points: lineA, fill: "none", stroke: COLORS[0], "stroke-width": 2 }));
    svg.append(s("polyline", { points: lineB, fill: "none", stroke: COLORS[2], "stroke-width": 2, "stroke-dasharray": "4 2" }));
    const last = points[points.length - 1];
    svg.append(s("rect", { x: x(last.t) - 3, y: yB(last.b) - 3, width: 6, height: 6, fill: COLORS[2] }));
    for (const p of points) {
      const dot = s("circle", { cx: x(p.t), cy: yA(p.a), r: points.length > 60 ? 1.5 : 3, fill: COLORS[0] });
      dot.append(s("title", {}, `${time(p.t)}: ${a.name} ${tick(p.a, p.a)}${a.unit ? " " + a.unit : ""}, ${b.name} ${p.b}`));
      svg.append(dot);
    }
  }
  let lx = left;
  for (const [name, color] of [[a.name, COLORS[0]], [b.name, COLORS[2]]]) {
    svg.append(s("rect", { x: lx, y: height + 3, width: 10, height: 10, fill: color }));
    svg.append(s("text", { x: lx + 14, y: height + 12 }, name));
    lx += 14 + 7 * name.length + 16; // about 7 px a character at 11 px
  }
  return svg;
}
