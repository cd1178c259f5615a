// Building DOM nodes without markup strings: every served datum goes in as text, so none can inject HTML.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2), value);
    else if (key === "text") node.textContent = String(value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: `h("td", {class: "x", onclick: fn}, "text", otherNode)`. */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** An SVG element, as `h`. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** The first 12 characters of a release id (git hashes are unique long before that), the full id on hover. */
export function shortId(id) {
  if (!id) return h("span", { class: "muted" }, "—");
  return h("code", { class: "id", title: id }, id.length > 14 ? id.slice(0, 12) : id);
}

/** Epoch seconds as local `YYYY-MM-DD HH:MM:SS`. */
export function when(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  const d = new Date(seconds * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

export function mean(values) {
  if (!Array.isArray(values) || values.length === 0) return null;
  return values.reduce((a, b) => a + b, 0) / values.length;
}

export function number(value, digits = 3) {
  if (value === null || value === undefined) return "—";
  if (typeof value !== "number") return String(value);
  return Number.isInteger(value) ? String(value) : value.toFixed(digits);
}

/** A two-column table of an object's fields (nested values as compact JSON). */
export function fields(object, skip = []) {
  const rows = Object.entries(object || {})
    .filter(([key]) => !skip.includes(key))
    .map(([key, value]) =>
      h("tr", {}, h("th", {}, key), h("td", {}, typeof value === "object" && value !== null ? JSON.stringify(value) : number(value))),
    );
  return rows.length ? h("table", { class: "fields" }, h("tbody", {}, rows)) : h("p", { class: "muted" }, "none");
}

export function section(title, ...children) {
  return h("section", { class: "card" }, h("h2", {}, title), ...children);
}

/** Run `fn` every `ms` until `signal` aborts (the view was left); the delay may change between runs. */
export function every(ms, fn, signal) {
  let timer = null;
  const tick = async () => {
    if (signal.aborted) return;
    let next = ms;
    try {
      const asked = await fn();
      if (typeof asked === "number") next = asked;
    } catch (error) {
      if (!signal.aborted) console.warn(error);
    }
    if (!signal.aborted) timer = setTimeout(tick, next);
  };
  timer = setTimeout(tick, ms);
  signal.addEventListener("abort", () => clearTimeout(timer));
}
