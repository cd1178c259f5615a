// Every datum the console shows comes through here: the public JSON routes, with the operator's token in the
// Authorization header. The token lives in this tab's sessionStorage only, never in a URL or in the page.

import { h } from "./dom.js";

// The server's root, relative to this file (served at <root>/console/api.js), so a path prefix in front of Reef works.
const ROOT = new URL("../", import.meta.url);
const TOKEN_KEY = "reef.console.token";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function hasToken() {
  return Boolean(sessionStorage.getItem(TOKEN_KEY));
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

export function serverRoot() {
  return ROOT.href;
}

let asking = null; // one prompt for every request that got a 401 meanwhile

function askForToken(refused) {
  if (asking) return asking;
  const dialog = document.getElementById("token-dialog");
  const form = document.getElementById("token-form");
  const input = document.getElementById("token-input");
  document.getElementById("token-message").textContent = refused
    ? "That token was refused. Enter a token this server accepts."
    : "This server needs a token.";
  input.value = "";
  asking = new Promise((resolve) => {
    form.addEventListener(
      "submit",
      (event) => {
        event.preventDefault();
        sessionStorage.setItem(TOKEN_KEY, input.value.trim());
        input.value = "";
        dialog.close();
        asking = null;
        document.dispatchEvent(new Event("reef-token"));
        resolve();
      },
      { once: true },
    );
  });
  dialog.oncancel = (event) => event.preventDefault(); // Escape cannot skip the prompt
  dialog.showModal();
  input.focus();
  return asking;
}

async function errorMessage(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    if (body && body.error && body.error.message) return body.error.message;
  } catch {
    // not JSON: the text itself says what went wrong
  }
  return text || response.statusText;
}

/**
 * Call a route: `api("/reef/status")`, `api(path, {method: "POST", body, scenario, params})`.
 * Resolves to the parsed JSON (or the Response with `raw: true`); a 401 asks for a token and retries;
 * any other error status rejects with an ApiError carrying the server's message.
 */
export async function api(path, { method = "GET", body, scenario, params, raw = false } = {}) {
  const url = new URL(path.replace(/^\//, ""), ROOT);
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(key, String(value));
  }
  let refused = false;
  for (;;) {
    const headers = { accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.authorization = `Bearer ${token}`;
    if (scenario) headers["x-reef-scenario"] = scenario;
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(url, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
    });
    if (response.status === 401) {
      refused = refused || Boolean(token);
      forgetToken();
      await askForToken(refused);
      refused = true; // a second 401 means the token just entered was refused
      continue;
    }
    if (!response.ok) throw new ApiError(response.status, await errorMessage(response));
    return raw ? response : response.json();
  }
}

export const enc = encodeURIComponent;

/** A note at the top of the page; errors stay until dismissed, others fade after a few seconds. */
export function notify(message, kind = "info") {
  const note = h(
    "div",
    { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" },
    h("span", {}, message),
    h("button", { type: "button", class: "quiet", "aria-label": "dismiss", onclick: () => note.remove() }, "×"),
  );
  document.getElementById("notices").append(note);
  if (kind !== "error") setTimeout(() => note.remove(), 6000);
}

/** Show an API failure as the server phrased it: `409: release … is already serving`. */
export function notifyError(error) {
  const status = error instanceof ApiError ? `${error.status}: ` : "";
  notify(`${status}${error.message}`, "error");
}

/** Ask the operator to confirm (an in-page dialog); resolves true or false. */
export function confirmAction(title, message, okLabel) {
  const dialog = document.getElementById("confirm-dialog");
  const form = document.getElementById("confirm-form");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-message").textContent = message;
  document.getElementById("confirm-ok").textContent = okLabel;
  return new Promise((resolve) => {
    const finish = (answer) => {
      form.removeEventListener("submit", onSubmit);
      cancel.removeEventListener("click", onCancel);
      dialog.removeEventListener("close", onClose);
      if (dialog.open) dialog.close();
      resolve(answer);
    };
    const onSubmit = (event) => {
      event.preventDefault();
      finish(true);
    };
    const onCancel = () => finish(false);
    const onClose = () => finish(false);
    const cancel = document.getElementById("confirm-cancel");
    form.addEventListener("submit", onSubmit);
    cancel.addEventListener("click", onCancel);
    dialog.addEventListener("close", onClose);
    dialog.showModal();
  });
}

/**
 * Open a route's raw JSON in a new tab. The token cannot ride in a URL, so the body is fetched with the header
 * and shown from a Blob URL; the tab is opened during the click, before the fetch, so no popup blocker stops it.
 */
export async function openRawJson(path, options = {}) {
  const tab = window.open("", "_blank");
  try {
    const response = await api(path, { ...options, raw: true });
    const text = JSON.stringify(await response.json(), null, 2);
    const url = URL.createObjectURL(new Blob([text], { type: "application/json" }));
    if (tab) tab.location.href = url;
    else h("a", { href: url, download: "record.json" }).click();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  } catch (error) {
    if (tab) tab.close();
    notifyError(error);
  }
}
