// The learning curve (one marker per learner step) and the training-loss sparkline, as inline SVG.

import { h, mean, number, s } from "./dom.js";

export const VERDICTS = ["published", "pending", "kept", "rejected", "skipped"];

const WIDTH = 760;
const HEIGHT = 280;
const MARGIN = { top: 16, right: 20, bottom: 58, left: 68 }; // left: room for the "unscored" rail label
const RAIL_OFFSET = 26; // steps with no gate scores sit on a rail under the x axis

/** A verdict's marker centred on (x, y): each verdict its own shape, so the curve reads without colour too. */
function marker(verdict, x, y) {
  const r = 5.5;
  const cls = `marker verdict-${verdict}`;
  switch (verdict) {
    case "published":
      return s("circle", { class: cls, cx: x, cy: y, r });
    case "pending":
      return s("path", { class: cls, d: `M${x},${y - r - 1} L${x + r + 1},${y + r} L${x - r - 1},${y + r} Z` });
    case "kept":
      return s("path", { class: cls, d: `M${x},${y - r - 1} L${x + r + 1},${y} L${x},${y + r + 1} L${x - r - 1},${y} Z` });
    case "rejected":
      return s("path", { class: cls, d: `M${x - r},${y - r} L${x + r},${y + r} M${x - r},${y + r} L${x + r},${y - r}` });
    default:
      return s("rect", { class: cls, x: x - r + 1, y: y - r + 1, width: 2 * r - 2, height: 2 * r - 2 });
  }
}

export function legend() {
  return h(
    "ul",
    { class: "legend" },
    VERDICTS.map((verdict) =>
      h("li", {}, s("svg", { width: 16, height: 16, viewBox: "0 0 16 16" }, marker(verdict, 8, 8)), verdict),
    ),
    h("li", {}, s("svg", { width: 22, height: 16 }, s("line", { class: "serving-line", x1: 1, y1: 8, x2: 21, y2: 8 })), "serving release's gate score"),
  );
}

function ticks(low, high, count) {
  if (high === low) return [low];
  const raw = (high - low) / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((f) => f * magnitude).find((candidate) => candidate >= raw);
  const out = [];
  for (let t = Math.ceil(low / step) * step; t <= high + step * 1e-9; t += step) out.push(Number(t.toFixed(10)));
  return out;
}

function describe(commit, candidate, serving) {
  const lines = [`step ${commit.step} · ${commit.verdict}`];
  if (commit.reason) lines.push(commit.reason);
  if (commit.release_id) lines.push(`release ${commit.release_id}`);
  if (candidate !== null) lines.push(`candidate ${number(candidate)} · serving ${number(serving)}`);
  const request = commit.metrics && commit.metrics.request;
  if (request && request.step_id) lines.push(`requested ${request.step_id}${request.text ? `: ${request.text}` : ""}`);
  return lines.join("\n");
}

/**
 * The curve of `commits` (ascending steps): per step the candidate's and the serving release's mean gate score
 * (`candidate_scores` / `current_scores`); `onPick(commit)` runs when a marker is clicked.
 */
export function learningCurve(commits, onPick) {
  const points = commits.map((commit) => ({
    commit,
    candidate: mean(commit.candidate_scores),
    serving: mean(commit.current_scores),
  }));
  const svg = s("svg", {
    class: "curve",
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    role: "img",
    "aria-label": `learning curve, ${commits.length} steps`,
  });
  if (!points.length) {
    svg.append(s("text", { x: WIDTH / 2, y: HEIGHT / 2, class: "empty", "text-anchor": "middle" }, "no learner steps yet"));
    return svg;
  }
  const scores = points.flatMap((p) => [p.candidate, p.serving]).filter((v) => v !== null);
  let low = scores.length ? Math.min(...scores) : 0;
  let high = scores.length ? Math.max(...scores) : 1;
  if (high - low < 1e-9) {
    low -= 0.5;
    high += 0.5;
  }
  const pad = (high - low) * 0.06;
  low -= pad;
  high += pad;
  const steps = points.map((p) => p.commit.step);
  let first = Math.min(...steps);
  let last = Math.max(...steps);
  if (first === last) {
    first -= 1;
    last += 1;
  }
  const plotBottom = HEIGHT - MARGIN.bottom;
  const x = (step) => MARGIN.left + ((step - first) / (last - first)) * (WIDTH - MARGIN.left - MARGIN.right);
  const y = (value) => plotBottom - ((value - low) / (high - low)) * (plotBottom - MARGIN.top);

  const axes = s("g", { class: "axes" });
  for (const t of ticks(low, high, 5)) {
    axes.append(
      s("line", { class: "grid", x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(t), y2: y(t) }),
      s("text", { x: MARGIN.left - 6, y: y(t) + 4, "text-anchor": "end" }, number(t, 2)),
    );
  }
  for (const t of ticks(first, last, Math.min(8, last - first)).filter(Number.isInteger)) {
    axes.append(s("text", { x: x(t), y: plotBottom + 14, "text-anchor": "middle" }, String(t)));
  }
  axes.append(
    s("line", { class: "axis", x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: plotBottom, y2: plotBottom }),
    s("text", { x: (MARGIN.left + WIDTH - MARGIN.right) / 2, y: HEIGHT - 4, "text-anchor": "middle" }, "step"),
    s("text", { x: 12, y: (MARGIN.top + plotBottom) / 2, transform: `rotate(-90 12 ${(MARGIN.top + plotBottom) / 2})`, "text-anchor": "middle" }, "gate score (mean)"),
    s("text", { x: MARGIN.left - 6, y: plotBottom + RAIL_OFFSET + 4, "text-anchor": "end", class: "rail-label" }, "unscored"),
  );
  svg.append(axes);

  const serving = points.filter((p) => p.serving !== null);
  if (serving.length) {
    svg.append(s("polyline", { class: "serving-line", points: serving.map((p) => `${x(p.commit.step)},${y(p.serving)}`).join(" ") }));
  }
  const candidates = points.filter((p) => p.candidate !== null);
  if (candidates.length > 1) {
    svg.append(s("polyline", { class: "candidate-line", points: candidates.map((p) => `${x(p.commit.step)},${y(p.candidate)}`).join(" ") }));
  }
  const markers = s("g", { class: "points" });
  for (const p of points) {
    const px = x(p.commit.step);
    const py = p.candidate === null ? plotBottom + RAIL_OFFSET : y(p.candidate);
    const group = s(
      "g",
      {
        class: "point",
        tabindex: 0,
        "data-step": p.commit.step,
        "data-verdict": p.commit.verdict,
        "data-candidate": p.candidate === null ? "" : p.candidate,
        "data-serving": p.serving === null ? "" : p.serving,
        onclick: () => onPick && onPick(p.commit),
      },
      s("title", {}, describe(p.commit, p.candidate, p.serving)),
      p.serving !== null ? s("circle", { class: "serving-dot", cx: px, cy: y(p.serving), r: 2.5 }) : null,
      marker(p.commit.verdict, px, py),
    );
    markers.append(group);
  }
  svg.append(markers);
  return svg;
}

/** The recent training losses as a small line with its last value. */
export function lossSparkline(losses) {
  const width = 320;
  const height = 64;
  const svg = s("svg", { class: "losses", viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "training loss" });
  const values = (losses || []).filter((v) => typeof v === "number" && Number.isFinite(v));
  if (!values.length) {
    svg.append(s("text", { x: 4, y: height / 2, class: "empty" }, "no losses reported yet"));
    return svg;
  }
  const low = Math.min(...values);
  const high = Math.max(...values) === low ? low + 1 : Math.max(...values);
  const x = (i) => 4 + (values.length === 1 ? 0 : (i / (values.length - 1)) * (width - 70));
  const y = (v) => height - 6 - ((v - low) / (high - low)) * (height - 12);
  svg.append(
    s("polyline", { class: "loss-line", points: values.map((v, i) => `${x(i)},${y(v)}`).join(" ") }),
    s("circle", { class: "loss-dot", cx: x(values.length - 1), cy: y(values.at(-1)), r: 3 }),
    s("text", { x: width - 60, y: 16 }, `loss ${number(values.at(-1))}`),
    s("text", { x: width - 60, y: 32, class: "muted" }, `${values.length} steps`),
  );
  return svg;
}
