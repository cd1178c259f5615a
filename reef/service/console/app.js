// The console's entry point: a hash router over three views (#/, #/scenario/S, #/scenario/S/record/ID).
// Routes live in the fragment, which never reaches the server; no token ever appears in a URL.

import { ApiError, forgetToken, hasToken, serverRoot } from "./api.js";
import { h } from "./dom.js";
import { showOverview } from "./overview.js";
import { showRecord } from "./records.js";
import { showScenario } from "./scenario.js";

const view = document.getElementById("view");
const crumbs = document.getElementById("crumbs");
const forget = document.getElementById("forget-token");
let leaving = null; // aborts the timers of the view being left

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "scenario" && parts[1]) {
    return parts[2] === "record" && parts[3]
      ? { name: "record", scenario: parts[1], recordId: parts[3] }
      : { name: "scenario", scenario: parts[1] };
  }
  return { name: "overview" };
}

function showCrumbs(current) {
  const items = [h("a", { href: "#/" }, "Scenarios")];
  if (current.scenario) items.push(" / ", h("a", { href: `#/scenario/${encodeURIComponent(current.scenario)}` }, current.scenario));
  if (current.recordId) items.push(" / ", current.recordId);
  crumbs.replaceChildren(...items);
}

async function show() {
  if (leaving) leaving.abort();
  leaving = new AbortController();
  const signal = leaving.signal;
  const current = route();
  showCrumbs(current);
  view.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  document.body.dataset.view = current.name;
  try {
    if (current.name === "scenario") await showScenario(view, current.scenario, signal);
    else if (current.name === "record") await showRecord(view, current.scenario, current.recordId);
    else await showOverview(view, signal);
    document.body.dataset.ready = current.name;
  } catch (error) {
    if (signal.aborted) return;
    const status = error instanceof ApiError ? `${error.status}: ` : "";
    view.replaceChildren(h("section", { class: "card" }, h("p", { class: "error", role: "alert" }, `${status}${error.message}`)));
  } finally {
    forget.hidden = !hasToken();
  }
}

forget.addEventListener("click", () => {
  forgetToken();
  forget.hidden = true;
  show();
});
document.addEventListener("reef-token", () => {
  forget.hidden = false;
});
document.getElementById("server").textContent = new URL(serverRoot()).host;
window.addEventListener("hashchange", () => {
  delete document.body.dataset.ready;
  show();
});
show();
