// taskroute dashboard charts: SVG drawn by hand (no library, no build step, no CDN).
// Styling lives in dashboard.css (the page's CSP allows no inline style attributes).
// Every mark carries a class and a data-testid so tests can assert on what is drawn.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

const r1 = (v) => Math.round(v * 10) / 10;
const shortTime = (ms) => new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

// Burn-down: remaining work over time (the history), the deadline, and the forecast from now
// to its ETA with the early/late range as a shaded wedge.
// history: [{at, remaining, added, finished}] oldest first, in buckets of bucketSeconds;
// forecast: {remaining, eta, etaEarly, etaLate} or null (finished, or no ETA); deadline: ISO
// string or null; end: ISO string (completion) or null.
function burndownChart({ history, bucketSeconds, deadline, forecast, end, label }) {
  const W = 560, H = 190, L = 44, R = 12, T = 12, B = 28;
  const pts = history.map((p) => ({ t: Date.parse(p.at), v: p.remaining }));
  if (history.length) {
    // The line starts at the first bucket's start with the work known then (what was left
    // at its end plus what finished in it), so the scope shows even when it all went fast.
    const ms = bucketSeconds * 1000;
    const start = Math.ceil(pts[0].t / ms) * ms - ms;
    pts.unshift({ t: start, v: history[0].remaining + history[0].finished });
  }
  const now = end ? Date.parse(end) : Date.now();
  const t0 = pts.length ? pts[0].t : now;
  const times = [now, ...pts.map((p) => p.t)];
  const dl = deadline ? Date.parse(deadline) : null;
  if (dl) times.push(dl);
  const fc = forecast && forecast.eta ? forecast : null;
  // An ETA far past the deadline would squash the chart: show at most three times the span
  // up to the deadline (or now); the forecast line runs off the clipped edge instead.
  const horizon = t0 + 3 * Math.max((dl || now) - t0, 60_000);
  if (fc) times.push(Math.min(Date.parse(fc.etaLate || fc.eta), horizon));
  let t1 = Math.max(...times);
  if (t1 <= t0) t1 = t0 + 60_000;
  const vmax = Math.max(1, ...pts.map((p) => p.v), fc ? fc.remaining : 0);
  const x = (t) => r1(L + ((t - t0) / (t1 - t0)) * (W - L - R));
  const y = (v) => r1(T + (1 - v / vmax) * (H - T - B));

  const svg = svgEl("svg", {
    class: "chart burndown", viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": label, "data-testid": "burndown", "data-t0": t0, "data-t1": t1,
    "data-vmax": vmax, "data-plot": `${L} ${T} ${W - R} ${H - B}`,
  });
  svg.append(svgEl("title", {}, label));
  svg.append(svgEl("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.append(svgEl("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  svg.append(svgEl("text", { class: "tick", x: L - 6, y: y(vmax) + 4, "text-anchor": "end" }, vmax));
  svg.append(svgEl("text", { class: "tick", x: L - 6, y: y(0) + 4, "text-anchor": "end" }, "0"));
  svg.append(svgEl("text", { class: "tick", x: L, y: H - 8 }, shortTime(t0)));

  if (fc) {
    const from = `${x(now)},${y(fc.remaining)}`;
    const early = Date.parse(fc.etaEarly || fc.eta), late = Date.parse(fc.etaLate || fc.eta);
    svg.append(svgEl("polygon", {
      class: "forecast-range", "data-testid": "forecast-range",
      points: `${from} ${x(early)},${y(0)} ${x(late)},${y(0)}`,
    }));
    svg.append(svgEl("line", {
      class: "forecast", "data-testid": "forecast-line",
      x1: x(now), y1: y(fc.remaining), x2: x(Date.parse(fc.eta)), y2: y(0),
    }));
  }
  if (pts.length) {
    svg.append(svgEl("polyline", {
      class: "history", "data-testid": "burndown-history",
      points: pts.map((p) => `${x(p.t)},${y(p.v)}`).join(" "),
    }));
    // the latest value as a dot: a young project's history is a single point
    const last = pts[pts.length - 1];
    svg.append(svgEl("circle", { class: "latest", cx: x(last.t), cy: y(last.v), r: 3 }));
  }
  if (dl) {
    const xd = x(dl);
    svg.append(svgEl("line", {
      class: "deadline", "data-testid": "deadline-line", "data-at": dl,
      x1: xd, y1: T, x2: xd, y2: H - B,
    }));
    const anchor = xd > W - R - 60 ? "end" : xd < L + 60 ? "start" : "middle";
    svg.append(svgEl("text", { class: "tick deadline-label", x: xd, y: H - 8, "text-anchor": anchor },
      `deadline ${shortTime(dl)}`));
  }
  return svg;
}

// Per-skill throughput: a bar per skill (tasks per hour now), and where there is a deadline
// ahead and work left, a mark at the pace the deadline needs (remaining / hours left).
// skills: [{skill, throughputPerHour, remaining}]; deadline: ISO string or null.
function throughputChart({ skills, deadline, label }) {
  const W = 560, rowH = 22, L = 120, R = 150, T = 6;
  const hoursLeft = deadline ? (Date.parse(deadline) - Date.now()) / 3_600_000 : null;
  const rows = skills.map((s) => ({
    ...s,
    needed: hoursLeft && hoursLeft > 0 && s.remaining > 0 ? s.remaining / hoursLeft : null,
  }));
  const top = Math.max(1e-9, ...rows.map((s) => Math.max(s.throughputPerHour, s.needed || 0)));
  const H = T * 2 + rows.length * rowH;
  const w = (v) => r1(((W - L - R) * v) / top);
  const svg = svgEl("svg", {
    class: "chart throughput", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label,
    "data-testid": "throughput",
  });
  svg.append(svgEl("title", {}, label));
  rows.forEach((s, i) => {
    const yTop = T + i * rowH;
    const g = svgEl("g", { "data-throughput-skill": s.skill });
    g.append(svgEl("text", { class: "tick", x: L - 6, y: yTop + 15, "text-anchor": "end" }, s.skill));
    g.append(svgEl("rect", {
      class: "rate" + (s.needed && s.throughputPerHour < s.needed ? " short" : ""),
      "data-testid": "rate", x: L, y: yTop + 4, height: rowH - 8, width: w(s.throughputPerHour),
    }));
    if (s.needed) {
      const xn = r1(L + w(s.needed));
      g.append(svgEl("line", { class: "needed", "data-testid": "needed", x1: xn, x2: xn,
                                y1: yTop + 1, y2: yTop + rowH - 1 }));
    }
    const text = `${s.throughputPerHour.toFixed(1)}/h` + (s.needed ? ` · needs ${s.needed.toFixed(1)}/h` : "");
    g.append(svgEl("text", { class: "tick", x: W - R + 6, y: yTop + 15 }, text));
    svg.append(g);
  });
  return svg;
}
