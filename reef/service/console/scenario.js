// One scenario: its learner and controls, learning curve, live training, release chain, commit log and records.

import { api, enc, notify, notifyError } from "./api.js";
import { learningCurve, legend, lossSparkline } from "./curve.js";
import { every, fields, h, mean, number, section, shortId, when } from "./dom.js";
import { recordsBrowser } from "./records.js";
import { releaseChain } from "./releases.js";
import { rolloutPanel } from "./rollout.js";

const COMMIT_PAGE = 1000;
const MAX_STEPS_SHOWN = 5000;
const BUSY_POLL_MS = 2000; // while a step runs or is queued
const IDLE_POLL_MS = 5000;

async function allCommits(scenario, lastStep) {
  let after = Math.max(-1, (lastStep || 0) - MAX_STEPS_SHOWN);
  const found = [];
  for (;;) {
    const page = await api(`/reef/scenarios/${enc(scenario)}/commits`, { params: { after_step: after, limit: COMMIT_PAGE } });
    found.push(...page.commits);
    if (page.commits.length < COMMIT_PAGE) return found;
    after = page.commits.at(-1).step;
  }
}

async function load(scenario) {
  const [contract, status, releases, rollout] = await Promise.all([
    api(`/reef/scenarios/${enc(scenario)}/contract`),
    api("/reef/status"),
    api(`/reef/scenarios/${enc(scenario)}/releases`),
    api(`/reef/scenarios/${enc(scenario)}/rollout`),
  ]);
  const state = status.scenarios[scenario] || {};
  const commits = await allCommits(scenario, state.step);
  return { contract, status, state, releases: releases.releases, commits, rollout };
}

function busy(state) {
  return Boolean((state.job && state.job.state && state.job.state !== "idle") || state.requested);
}

function summary(data) {
  const { contract, state } = data;
  const gate = contract.gate || state.gate || {};
  const requested = contract.requested || state.requested;
  return h(
    "dl",
    { class: "summary" },
    h("dt", {}, "recipe"),
    h("dd", {}, `${contract.recipe} (${contract.surface})`, contract.learns ? "" : " · does not learn"),
    h("dt", {}, "serving release"),
    h("dd", { class: "serving-release" }, shortId(state.current_release_id)),
    h("dt", {}, "training mode"),
    h("dd", { class: "training-mode" }, contract.training_mode || "—", contract.paused ? h("span", { class: "badge paused" }, "paused") : null),
    h("dt", {}, "ready batch"),
    h("dd", {}, `${contract.ready} of ${contract.batch_size} units`),
    h("dt", {}, "gate"),
    h("dd", {}, `${gate.source || "—"} · ${gate.tasks ?? 0} tasks`, retentionLine((state.gate || {}).retention), gate.waiting ? h("div", { class: "muted small" }, gate.waiting) : null),
    requested ? h("dt", {}, "requested step") : null,
    requested ? h("dd", {}, `${requested.step_id} (${requested.state})${requested.text ? `: ${requested.text}` : ""}`) : null,
  );
}

function controls(scenario, data, refresh) {
  const { contract, releases } = data;
  const run = async (label, call) => {
    try {
      const answer = await call();
      notify(label(answer), "success");
      await refresh(true);
    } catch (error) {
      notifyError(error);
    }
  };
  const mode = h(
    "select",
    { name: "training_mode", "aria-label": "training mode", disabled: !contract.learns },
    ["auto", "manual", "hybrid"].map((m) => h("option", { value: m, selected: m === contract.training_mode }, m)),
  );
  mode.addEventListener("change", () =>
    run(
      (answer) => `training mode is now ${answer.training_mode}`,
      () => api(`/reef/scenarios/${enc(scenario)}/update`, { method: "POST", body: { training_mode: mode.value } }),
    ),
  );
  const pause = h(
    "button",
    {
      type: "button",
      class: "pause",
      disabled: !contract.learns,
      onclick: () =>
        run(
          (answer) => (answer.paused ? "learning paused" : "learning resumed"),
          () => api(`/reef/scenarios/${enc(scenario)}/update`, { method: "POST", body: { paused: !contract.paused } }),
        ),
    },
    contract.paused ? "Resume learning" : "Pause learning",
  );
  const text = h("input", { type: "text", name: "text", placeholder: "instruction for the recipe (optional)", "aria-label": "instruction" });
  const from = h(
    "select",
    { name: "release_id", "aria-label": "train from" },
    h("option", { value: "" }, "from the serving release"),
    releases.filter((r) => !r.current).map((r) => h("option", { value: r.release_id }, `from ${r.release_id.slice(0, 12)} (${r.operation})`)),
  );
  const train = h(
    "form",
    { class: "train" },
    text,
    from,
    h("button", { type: "submit", class: "primary", disabled: !contract.learns }, "Train now"),
  );
  train.addEventListener("submit", (event) => {
    event.preventDefault();
    const body = {};
    if (text.value.trim()) body.text = text.value.trim();
    if (from.value) body.release_id = from.value;
    run((answer) => `queued step ${answer.step_id}`, () => api("/reef/train", { method: "POST", scenario, body }));
  });
  return h(
    "div",
    { class: "controls" },
    h("label", {}, "Training mode ", mode),
    pause,
    train,
    contract.learns ? null : h("p", { class: "muted small" }, `The recipe ${contract.recipe} does not learn.`),
  );
}

function liveTraining(state) {
  const job = state.job || { state: "idle" };
  return h(
    "div",
    { class: "live", "data-job-state": job.state },
    h("p", {}, "job: ", h("strong", { class: "job-state" }, job.state), job.step !== undefined ? ` · step ${job.step}` : "", job.trained_from ? [" · from ", shortId(job.trained_from)] : null),
    job.progress ? fields(job.progress) : null,
    lossSparkline(state.recent_losses),
    state.errors && state.errors.length
      ? h("details", {}, h("summary", {}, `${state.errors.length} recent errors`), h("ul", {}, state.errors.map((e) => h("li", {}, `${when(e.at)} ${e.step !== null ? `step ${e.step}: ` : ""}${e.message}`))))
      : null,
  );
}

function retentionLine(retention) {
  if (!retention || !retention.retention_items) return null;
  const lessons = retention.lessons ? ` over lessons ${Object.entries(retention.lessons).map(([l, n]) => `${l}: ${n}`).join(", ")}` : "";
  return h(
    "div",
    { class: "retention muted small" },
    `retention set: ${retention.items} of ${retention.earlier_items} earlier items (at most ${retention.retention_items})${lessons}; refuses a loss over ${retention.max_regression}`,
  );
}

function retentionBadge(commit) {
  const retention = (commit.metrics || {}).retention;
  if (!retention || !retention.refused) return null;
  const title = `lost ${number(retention.regression)} on ${retention.tasks} items from earlier lessons (max_regression ${retention.max_regression})`;
  return h("span", { class: "badge retention-refused", title }, "retention");
}

function commitLog(commits) {
  return h(
    "table",
    { class: "commits" },
    h("thead", {}, h("tr", {}, ["Step", "Verdict", "Candidate", "Serving", "Release", "Records", "When", "Reason"].map((t) => h("th", {}, t)))),
    h(
      "tbody",
      {},
      [...commits].reverse().map((commit) =>
        h(
          "tr",
          { id: `commit-${commit.step}`, class: "commit", "data-step": commit.step, "data-verdict": commit.verdict },
          h("td", {}, String(commit.step)),
          h("td", {}, h("span", { class: `badge verdict-${commit.verdict}` }, commit.verdict), retentionBadge(commit)),
          h("td", {}, number(mean(commit.candidate_scores))),
          h("td", {}, number(mean(commit.current_scores))),
          h("td", {}, shortId(commit.release_id)),
          h("td", {}, String((commit.consumed_record_ids || []).length)),
          h("td", {}, when(commit.created_at)),
          h("td", { class: "reason" }, commit.reason || ""),
        ),
      ),
    ),
  );
}

function pick(commit) {
  const row = document.getElementById(`commit-${commit.step}`);
  if (!row) return;
  document.querySelectorAll("tr.commit.picked").forEach((r) => r.classList.remove("picked"));
  row.classList.add("picked");
  row.scrollIntoView({ block: "center", behavior: "smooth" });
}

export async function showScenario(root, scenario, signal) {
  let data = await load(scenario);
  if (signal.aborted) return;
  const parts = {
    summary: h("div", {}),
    controls: h("div", {}),
    curve: h("div", { class: "curve-box" }),
    live: h("div", {}),
    rollout: h("div", {}),
    chain: h("div", {}),
    commits: h("div", { class: "scroll" }),
  };
  const curveTitle = h("h2", {}, "");
  const titleCurve = () => {
    curveTitle.textContent = `Learning curve (${data.commits.length} steps)`;
  };
  const render = (everything) => {
    parts.summary.replaceChildren(summary(data));
    parts.live.replaceChildren(liveTraining(data.state));
    parts.rollout.replaceChildren(rolloutPanel(scenario, data.rollout, () => refresh(true)));
    if (!everything) return;
    parts.controls.replaceChildren(controls(scenario, data, refresh));
    parts.curve.replaceChildren(learningCurve(data.commits, pick), legend());
    parts.chain.replaceChildren(releaseChain(data.releases, { scenario, surface: data.contract.surface, reload: () => refresh(true) }));
    parts.commits.replaceChildren(commitLog(data.commits));
    titleCurve();
  };
  const refresh = async (everything) => {
    const before = data;
    if (everything) {
      data = await load(scenario);
    } else {
      const [contract, status, rollout] = await Promise.all([
        api(`/reef/scenarios/${enc(scenario)}/contract`),
        api("/reef/status"),
        api(`/reef/scenarios/${enc(scenario)}/rollout`),
      ]);
      const state = status.scenarios[scenario] || {};
      data = { ...data, contract, status, state, rollout };
      // A finished step, a new release or a changed control redraws the rest from fresh data.
      const changed =
        state.step !== before.state.step ||
        state.current_release_id !== before.state.current_release_id ||
        contract.training_mode !== before.contract.training_mode ||
        contract.paused !== before.contract.paused;
      if (changed) data = await load(scenario);
      everything = changed;
    }
    if (!signal.aborted) render(everything);
  };
  render(true);
  root.replaceChildren(
    h("div", { class: "scenario-head" }, h("h1", {}, scenario), parts.summary, parts.controls),
    h("section", { class: "card learning-curve" }, curveTitle, parts.curve),
    section("Live training", parts.live),
    section("Rollout", parts.rollout),
    section("Releases", parts.chain),
    section("Commit log", parts.commits),
    recordsBrowser(scenario, data.releases),
  );
  const pollDelay = () => (busy(data.state) ? BUSY_POLL_MS : IDLE_POLL_MS);
  every(
    pollDelay(),
    async () => {
      await refresh(false);
      titleCurve();
      return pollDelay();
    },
    signal,
  );
}
