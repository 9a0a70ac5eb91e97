// Hand-drawn SVG charts (no chart library): stacked bars over time, and horizontal bars.

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
