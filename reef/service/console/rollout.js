// A scenario's rollout: both arms' live score with its interval, the difference the test reads, and the decision.

import { api, confirmAction, enc, notify, notifyError } from "./api.js";
import { h, number, shortId, when } from "./dom.js";

function interval(pair) {
  return pair ? `[${number(pair[0])}, ${number(pair[1])}]` : "—";
}

// A bar of the interval [low, high] on the axis [min, max], with the mean as a tick. Positions go through the
// CSSOM (`element.style`): the console's Content-Security-Policy refuses style attributes in markup.
function intervalBar(pair, mean, min, max) {
  if (!pair) return h("span", { class: "muted" }, "no reports yet");
  const span = max - min || 1;
  const at = (x) => (100 * (Math.min(max, Math.max(min, x)) - min)) / span;
  const bar = h("span", { class: "interval" });
  bar.style.left = `${at(pair[0])}%`;
  bar.style.width = `${at(pair[1]) - at(pair[0])}%`;
  let tick = null;
  if (mean !== null && mean !== undefined) {
    tick = h("span", { class: "interval-mean" });
    tick.style.left = `${at(mean)}%`;
  }
  return h("div", { class: "interval-bar", title: interval(pair) }, bar, tick);
}

function armRow(name, stats, low, high) {
  return h(
    "tr",
    { class: `arm arm-${name}`, "data-arm": name },
    h("th", {}, name),
    h("td", {}, String(stats.requests)),
    h("td", {}, String(stats.errors)),
    h("td", {}, String(stats.reports)),
    h("td", { class: "arm-mean" }, number(stats.mean)),
    h("td", { class: "arm-interval" }, interval(stats.interval)),
    h("td", {}, intervalBar(stats.interval, stats.mean, low, high)),
  );
}

function actions(scenario, view, reload) {
  const act = async (action) => {
    const ok = await confirmAction(
      `${action === "promote" ? "Promote" : "Roll back"} the canary?`,
      action === "promote"
        ? "The canary serves all of the scenario's traffic from now on."
        : "The incumbent serves all of the scenario's traffic again; the canary stays stored, pending.",
      action === "promote" ? "Promote" : "Roll back",
    );
    if (!ok) return;
    try {
      const ended = await api(`/reef/scenarios/${enc(scenario)}/rollout`, { method: "POST", body: { action } });
      notify(`rollout ${ended.rollout_id}: ${ended.state}`, "success");
      await reload();
    } catch (error) {
      notifyError(error);
    }
  };
  return h(
    "div",
    { class: "controls" },
    h("button", { type: "button", class: "rollout-promote primary", onclick: () => act("promote") }, "Promote now"),
    h("button", { type: "button", class: "rollout-rollback", onclick: () => act("rollback") }, "Roll back now"),
  );
}

/** The rollout panel of `scenario` from its `GET /reef/scenarios/{s}/rollout` view. */
export function rolloutPanel(scenario, view, reload) {
  if (!view || view.state === "none") {
    return h("p", { class: "muted rollout-none" }, "No rollout yet. In rollout mode canary, the next release the gate accepts opens one.");
  }
  const arms = view.arms || {};
  const bounds = Object.values(arms).flatMap((a) => a.interval || []);
  const low = Math.min(0, ...bounds);
  const high = Math.max(1, ...bounds);
  const difference = (view.difference || {}).interval;
  return h(
    "div",
    { class: "rollout", "data-state": view.state },
    h(
      "p",
      {},
      h("span", { class: `badge rollout-state state-${view.state}` }, view.state),
      ` ${view.rollout_id} · canary ${shortId(view.candidate_release_id)} on ${Math.round(100 * view.share)}% of the traffic`,
      ` against ${shortId(view.incumbent_release_id)} · since ${when(view.started_at)}`,
    ),
    h(
      "table",
      { class: "arms" },
      h("thead", {}, h("tr", {}, ["Arm", "Requests", "Failed", "Reports", "Mean score", "Interval", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, ["candidate", "incumbent"].filter((n) => arms[n]).map((n) => armRow(n, arms[n], low, high))),
    ),
    h(
      "p",
      { class: "rollout-difference" },
      `difference (candidate − incumbent): ${interval(difference)}`,
      h("span", { class: "muted small" }, " — promoted once it lies above 0, rolled back once below 0"),
    ),
    view.decision
      ? h("p", { class: "rollout-decision" }, h("strong", {}, view.decision), ` (${view.decided_by}): ${view.reason || ""}`)
      : null,
    view.state === "canary" ? actions(scenario, view, reload) : null,
  );
}
