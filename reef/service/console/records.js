// The records browser (filter by request type and release, page by cursor) and one record's page.

import { api, enc, notifyError, openRawJson } from "./api.js";
import { h, number, section, shortId, when } from "./dom.js";
import { cursorSince } from "./recent.js";

const PAGE = 50;
const MAX_SHOWN_CHARS = 4000; // a body longer than this is cut; the raw JSON button shows all of it

function recordHref(scenario, id) {
  return `#/scenario/${enc(scenario)}/record/${enc(id)}`;
}

/** The browser's section; `releases` fills the release filter. */
export function recordsBrowser(scenario, releases) {
  const type = h(
    "select",
    { name: "request_type", "aria-label": "request type" },
    h("option", { value: "" }, "any type"),
    h("option", { value: "inference" }, "inference"),
    h("option", { value: "report" }, "report"),
  );
  const release = h(
    "select",
    { name: "release_id", "aria-label": "release" },
    h("option", { value: "" }, "any release"),
    releases.map((r) => h("option", { value: r.release_id }, `${r.release_id.slice(0, 12)} (${r.operation})`)),
  );
  const tbody = h("tbody", {});
  const pager = h("div", { class: "pager" });
  const cursors = [0]; // the cursor each page shown so far started at
  let next = null;

  const load = async (cursor) => {
    try {
      const page = await api(`/reef/scenarios/${enc(scenario)}/records`, {
        params: { after_sequence: cursor, limit: PAGE, request_type: type.value, release_id: release.value },
      });
      next = page.next_after_sequence;
      tbody.replaceChildren(
        ...page.records.map((record) =>
          h(
            "tr",
            { class: "record-row", "data-record-id": record.agent_record_id, "data-request-type": record.request_type },
            h("td", {}, String(record.sequence)),
            h("td", {}, h("a", { href: recordHref(scenario, record.agent_record_id) }, record.agent_record_id)),
            h("td", {}, record.request_type),
            h("td", {}, when(record.created_at)),
            h("td", {}, shortId(record.release_id)),
            h("td", {}, number(record.score)),
            h("td", {}, record.references ? String(record.references.length) : "—"),
            h("td", {}, record.consumed_step ?? "—", record.evicted ? h("span", { class: "badge" }, "evicted") : null),
          ),
        ),
      );
      if (!page.records.length) tbody.append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "no records")));
      pager.replaceChildren(
        h("button", { type: "button", disabled: cursors.length < 2, onclick: back }, "← Earlier"),
        h("span", { class: "muted" }, `page ${cursors.length}`),
        h("button", { type: "button", disabled: next === null, onclick: forward }, "Later →"),
        h("button", { type: "button", onclick: lastHour }, "Jump to the last hour"),
      );
    } catch (error) {
      notifyError(error);
    }
  };
  const restart = (cursor = 0) => {
    cursors.length = 0;
    cursors.push(cursor);
    return load(cursor);
  };
  const forward = () => {
    cursors.push(next);
    return load(next);
  };
  const back = () => {
    cursors.pop();
    return load(cursors.at(-1));
  };
  const lastHour = async () => restart(await cursorSince(scenario, Date.now() / 1000 - 3600));
  type.addEventListener("change", () => restart());
  release.addEventListener("change", () => restart());
  restart();
  return section(
    "Records",
    h("div", { class: "filters" }, type, release),
    h(
      "table",
      { class: "records" },
      h(
        "thead",
        {},
        h("tr", {}, ["Seq", "Record", "Type", "Created", "Served by", "Score", "Refs", "Consumed step"].map((t) => h("th", {}, t))),
      ),
      tbody,
    ),
    pager,
  );
}

function jsonBlock(title, value, rawPath) {
  if (value === undefined) return null;
  const text = JSON.stringify(value, null, 2) ?? "null";
  const cut = text.length > MAX_SHOWN_CHARS;
  return h(
    "div",
    { class: "json-block", "data-part": title },
    h("h3", {}, title),
    h("pre", {}, cut ? `${text.slice(0, MAX_SHOWN_CHARS)}\n…` : text),
    cut
      ? h(
          "p",
          { class: "muted small" },
          `cut at ${MAX_SHOWN_CHARS} of ${text.length} characters · `,
          h("button", { type: "button", class: "link raw", onclick: () => openRawJson(rawPath) }, "open the raw JSON"),
        )
      : null,
  );
}

function recordLinks(scenario, ids) {
  if (!ids || !ids.length) return h("span", { class: "muted" }, "none");
  return h("ul", { class: "links" }, ids.map((id) => h("li", {}, h("a", { href: recordHref(scenario, id) }, id))));
}

/** One record: its request and response (or report body), the reports citing it, the release that served it. */
export async function showRecord(root, scenario, recordId) {
  const path = `/reef/scenarios/${enc(scenario)}/records/${enc(recordId)}`;
  const record = await api(path);
  const payload = record.payload || {};
  const commits = await api(`/reef/scenarios/${enc(scenario)}/commits`, { params: { record_id: recordId } });
  const consumedBy = commits.commits[0];
  const meta = h(
    "table",
    { class: "fields" },
    h(
      "tbody",
      {},
      h("tr", {}, h("th", {}, "type"), h("td", {}, record.request_type)),
      h("tr", {}, h("th", {}, "sequence"), h("td", {}, String(record.sequence))),
      h("tr", {}, h("th", {}, "created"), h("td", {}, when(record.created_at))),
      record.request_type === "inference"
        ? h(
            "tr",
            { class: "served-by" },
            h("th", {}, "served by release"),
            h("td", {}, record.release_id ? h("a", { href: `#/scenario/${enc(scenario)}`, title: "the scenario's release chain" }, record.release_id) : "—"),
          )
        : null,
      h("tr", {}, h("th", {}, "score"), h("td", {}, number(record.score))),
      h(
        "tr",
        {},
        h("th", {}, "consumed by step"),
        h("td", {}, consumedBy ? `${consumedBy.step} (${consumedBy.verdict})` : record.consumed_step ?? "not yet"),
      ),
      h("tr", {}, h("th", {}, "content hash"), h("td", {}, h("code", {}, record.content_hash || "—"))),
      record.evicted ? h("tr", {}, h("th", {}, "body"), h("td", {}, "evicted by retention (hash kept)")) : null,
    ),
  );
  const parts =
    record.request_type === "inference"
      ? [
          jsonBlock("request", payload.request, path),
          jsonBlock("response", payload.response, path),
          payload.error !== undefined ? jsonBlock("error", payload.error, path) : null,
          h("div", { class: "cited-by" }, h("h3", {}, "Reports citing it"), recordLinks(scenario, record.cited_by)),
          jsonBlock("usage and timing", { dialect: payload.dialect, usage: payload.usage, timing: payload.timing }, path),
        ]
      : [
          h("div", { class: "references" }, h("h3", {}, "Inferences it cites"), recordLinks(scenario, record.references)),
          jsonBlock("feedback", payload.feedback, path),
          jsonBlock("metadata", payload.metadata, path),
          jsonBlock("report", payload, path),
        ];
  root.replaceChildren(
    section(
      `Record ${record.agent_record_id}`,
      h(
        "p",
        {},
        h("a", { href: `#/scenario/${enc(scenario)}` }, `← ${scenario}`),
        " · ",
        h("button", { type: "button", class: "link raw", onclick: () => openRawJson(path) }, "Raw JSON"),
      ),
      meta,
      ...parts,
    ),
  );
}
