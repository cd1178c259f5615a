// The scenarios overview: per scenario its recipe, serving release, last hour's traffic, ready batch and learner.

import { api, enc } from "./api.js";
import { every, h, section, shortId, when } from "./dom.js";
import { countSince } from "./recent.js";

const HOUR_S = 3600;

function learnerCells(state) {
  if (!state) return ["ready", "learner", "mode", "last-verdict"].map((cls) => h("td", { class: `${cls} muted` }, "—"));
  const job = state.job || { state: "idle" };
  const last = state.last_commit;
  const learning = state.learning === false ? "does not learn" : job.state;
  return [
    h("td", { class: "ready" }, state.ready !== undefined ? `${state.ready} / ${state.batch_size}` : "—"),
    h("td", { class: "learner" }, learning, state.paused ? h("span", { class: "badge paused" }, "paused") : null),
    h("td", { class: "mode" }, state.training_mode || "—"),
    h(
      "td",
      { class: "last-verdict" },
      last ? h("span", { class: `badge verdict-${last.verdict}`, title: last.reason || "" }, `${last.verdict} (step ${last.step})`) : "—",
    ),
  ];
}

function deployment(status) {
  return h(
    "p",
    { class: "muted" },
    `Reef ${status.version} · recipe ${status.recipe} (${status.surface}) · `,
    `gate policy ${status.evaluation ? status.evaluation.policy : "—"}`,
    status.learning && status.learning.review ? " · review mode (accepted candidates wait as pending)" : "",
  );
}

export async function showOverview(root, signal) {
  const [listed, status] = await Promise.all([api("/reef/scenarios"), api("/reef/status")]);
  if (signal.aborted) return;
  const names = listed.scenarios.map((scenario) => scenario.name);
  const rows = new Map();
  const body = h(
    "tbody",
    {},
    listed.scenarios.map((scenario) => {
      const state = status.scenarios[scenario.name];
      const row = h(
        "tr",
        { "data-scenario": scenario.name },
        h("td", {}, h("a", { href: `#/scenario/${enc(scenario.name)}` }, scenario.name)),
        h("td", {}, scenario.recipe),
        h("td", { class: "serving" }, shortId(state ? state.current_release_id : null)),
        h("td", { class: "inferences" }, "…"),
        h("td", { class: "reports" }, "…"),
        ...learnerCells(state),
        h("td", { class: "muted" }, when(scenario.created_at)),
      );
      rows.set(scenario.name, row);
      return row;
    }),
  );
  const table = h(
    "table",
    { class: "overview" },
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Scenario", "Recipe", "Serving release", "Inferences (1 h)", "Reports (1 h)", "Ready batch", "Learner", "Mode", "Last verdict", "Created"].map(
          (title) => h("th", {}, title),
        ),
      ),
    ),
    body,
  );
  root.replaceChildren(
    section(
      "Scenarios",
      deployment(status),
      names.length
        ? table
        : h("p", { class: "muted" }, "No scenarios yet: send a request with an x-reef-scenario header, or POST /reef/scenarios."),
    ),
  );

  const fillCounts = async () => {
    for (const name of names) {
      if (signal.aborted) return;
      const row = rows.get(name);
      try {
        const counts = await countSince(name, Date.now() / 1000 - HOUR_S);
        const shown = (n) => (counts.capped ? `≥ ${n}` : String(n));
        row.querySelector(".inferences").textContent = shown(counts.inference);
        row.querySelector(".reports").textContent = shown(counts.report);
      } catch (error) {
        row.querySelector(".inferences").textContent = `error: ${error.message}`;
      }
    }
  };
  fillCounts();
  every(
    5000,
    async () => {
      const fresh = await api("/reef/status");
      for (const [name, row] of rows) {
        const state = fresh.scenarios[name];
        row.querySelector(".serving").replaceChildren(shortId(state ? state.current_release_id : null));
        const cells = learnerCells(state);
        for (const cls of ["ready", "learner", "mode", "last-verdict"]) {
          const old = row.querySelector(`.${cls}`);
          const made = cells.find((cell) => cell.classList.contains(cls));
          if (old && made) old.replaceWith(made);
        }
      }
    },
    signal,
  );
  every(60_000, fillCounts, signal);
}
