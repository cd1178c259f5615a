// The release chain, newest first, with what each release changed and the rollback / promote actions.

import { api, confirmAction, enc, notify, notifyError } from "./api.js";
import { folded, treeDiff } from "./diff.js";
import { fields, h, shortId, when } from "./dom.js";

// Metric keys that are bookkeeping, not what a release changed.
const QUIET_METRICS = ["consumed_record_ids", "proposer_reply", "proposer_replies"];

function harnessFiles(scenario, releaseId) {
  return api("/reef/harness", { scenario, params: { release_id: releaseId } }).then((view) => view.stored_files || view.files || {});
}

function renderDiff(files) {
  const changed = files.filter((file) => file.status !== "same");
  if (!changed.length) return h("p", { class: "muted" }, "same files as its parent");
  return h(
    "div",
    { class: "diff" },
    changed.map((file) =>
      h(
        "div",
        { class: "diff-file", "data-path": file.path, "data-status": file.status },
        h("div", { class: "diff-path" }, h("span", { class: `badge ${file.status}` }, file.status), " ", file.path),
        h(
          "pre",
          {},
          folded(file.ops).map((line) =>
            line.op === "…"
              ? h("span", { class: "diff-line fold" }, `… ${line.skipped} unchanged lines\n`)
              : h(
                  "span",
                  { class: `diff-line ${line.op === "+" ? "add" : line.op === "-" ? "del" : "ctx"}` },
                  `${line.op} ${line.text}\n`,
                ),
          ),
        ),
      ),
    ),
  );
}

async function changesOf(release, scenario, surface) {
  const parts = [];
  const metrics = release.metrics || {};
  const consumed = Array.isArray(metrics.consumed_record_ids) ? metrics.consumed_record_ids.length : null;
  if (surface === "harness") {
    const [after, before] = await Promise.all([
      harnessFiles(scenario, release.release_id),
      release.parent_release_id ? harnessFiles(scenario, release.parent_release_id) : Promise.resolve({}),
    ]);
    parts.push(
      h("h4", {}, release.parent_release_id ? "Files changed from its parent" : "Files of the first release"),
      renderDiff(treeDiff(before, after)),
    );
  }
  parts.push(
    h("h4", {}, surface === "weights" ? "Adapter metrics" : "Metrics"),
    fields(metrics, QUIET_METRICS),
    consumed !== null ? h("p", { class: "muted small" }, `trained on ${consumed} records`) : null,
  );
  return parts;
}

/**
 * The chain as a list of `li.release[data-release-id]`; `reload()` runs after a rollback or promote succeeds.
 */
export function releaseChain(releases, { scenario, surface, reload }) {
  if (!releases.length) return h("p", { class: "muted" }, "no releases yet");
  const act = async (release, operation) => {
    const verb = operation === "rollback" ? "Roll back" : "Promote";
    const ok = await confirmAction(
      `${verb} ${scenario}?`,
      operation === "rollback"
        ? `Serve release ${release.release_id} again. It is published as a new release; history is kept.`
        : `Serve the pending release ${release.release_id}. It is published as a new release.`,
      verb,
    );
    if (!ok) return;
    try {
      const made = await api(`/reef/scenarios/${enc(scenario)}/${operation}`, {
        method: "POST",
        body: { release_id: release.release_id },
      });
      notify(`${verb}: release ${made.release_id} now serves`, "success");
      await reload();
    } catch (error) {
      notifyError(error);
    }
  };
  return h(
    "ol",
    { class: "chain" },
    releases.map((release) => {
      const details = h("details", { class: "changes" }, h("summary", {}, "What it changed"));
      let loaded = false;
      details.addEventListener("toggle", async () => {
        if (!details.open || loaded) return;
        loaded = true;
        const body = h("div", { class: "changes-body" }, h("p", { class: "muted" }, "Loading…"));
        details.append(body);
        try {
          body.replaceChildren(...(await changesOf(release, scenario, surface)));
        } catch (error) {
          body.replaceChildren(h("p", { class: "error" }, `${error.status || ""} ${error.message}`));
        }
      });
      const classes = ["release", release.current ? "current" : "", release.pending ? "pending" : ""].join(" ");
      return h(
        "li",
        { class: classes.trim(), "data-release-id": release.release_id, "data-operation": release.operation, id: `release-${release.release_id}` },
        h(
          "div",
          { class: "release-head" },
          shortId(release.release_id),
          h("span", { class: `badge op-${release.operation}` }, release.operation),
          release.current ? h("span", { class: "badge serving" }, "serving") : null,
          release.canary ? h("span", { class: "badge state-canary" }, "canary") : null,
          release.pending && !release.canary ? h("span", { class: "badge verdict-pending" }, "pending") : null,
          h("span", { class: "muted" }, `step ${release.step ?? "—"} · ${when(release.created_at)}`),
          h("span", { class: "muted" }, "from ", shortId(release.parent_release_id)),
          h(
            "span",
            { class: "release-actions" },
            !release.current && !release.pending
              ? h("button", { type: "button", class: "rollback", onclick: () => act(release, "rollback") }, "Roll back to this")
              : null,
            release.pending
              ? h("button", { type: "button", class: "promote primary", onclick: () => act(release, "promote") }, "Promote")
              : null,
          ),
        ),
        details,
      );
    }),
  );
}
