// A line diff of two texts: a longest-common-subsequence table over the lines between the common prefix and
// suffix. Harness files are small text (rules, skills, memory), so this is enough; a well-kept library (jsdiff)
// would add a vendored file for the one function the console needs.

const MAX_CELLS = 4_000_000; // beyond this the middle is shown as removed-then-added, not aligned

/** Ops `{op: " " | "-" | "+", text}` turning `before` into `after`, line by line. */
export function lineDiff(before, after) {
  const a = splitLines(before);
  const b = splitLines(after);
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const ops = a.slice(0, start).map((text) => ({ op: " ", text }));
  ops.push(...middle(a.slice(start, endA), b.slice(start, endB)));
  ops.push(...a.slice(endA).map((text) => ({ op: " ", text })));
  return ops;
}

function splitLines(text) {
  if (text === null || text === undefined || text === "") return [];
  const lines = String(text).split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

function middle(a, b) {
  const n = a.length;
  const m = b.length;
  if (n === 0 || m === 0 || (n + 1) * (m + 1) > MAX_CELLS) {
    return [...a.map((text) => ({ op: "-", text })), ...b.map((text) => ({ op: "+", text }))];
  }
  // lengths[i * (m + 1) + j] = LCS length of a[i:] and b[j:]
  const width = m + 1;
  const lengths = new Uint32Array((n + 1) * width);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lengths[i * width + j] =
        a[i] === b[j]
          ? lengths[(i + 1) * width + j + 1] + 1
          : Math.max(lengths[(i + 1) * width + j], lengths[i * width + j + 1]);
    }
  }
  const ops = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      ops.push({ op: " ", text: a[i++] });
      j++;
    } else if (lengths[(i + 1) * width + j] >= lengths[i * width + j + 1]) {
      ops.push({ op: "-", text: a[i++] });
    } else {
      ops.push({ op: "+", text: b[j++] });
    }
  }
  while (i < n) ops.push({ op: "-", text: a[i++] });
  while (j < m) ops.push({ op: "+", text: b[j++] });
  return ops;
}

/** The ops with long unchanged runs folded to `context` lines around each change (`{op: "…", skipped}`). */
export function folded(ops, context = 3) {
  const keep = new Array(ops.length).fill(false);
  ops.forEach((op, index) => {
    if (op.op === " ") return;
    for (let k = Math.max(0, index - context); k <= Math.min(ops.length - 1, index + context); k++) keep[k] = true;
  });
  const out = [];
  let skipped = 0;
  ops.forEach((op, index) => {
    if (keep[index]) {
      if (skipped) out.push({ op: "…", skipped });
      skipped = 0;
      out.push(op);
    } else {
      skipped++;
    }
  });
  if (skipped) out.push({ op: "…", skipped });
  return out;
}

/** Per file of two `{path: text}` maps: `{path, status: added|removed|changed|same, ops}`, sorted by path. */
export function treeDiff(beforeFiles, afterFiles) {
  const before = beforeFiles || {};
  const after = afterFiles || {};
  const paths = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  return paths.map((path) => {
    const inBefore = Object.hasOwn(before, path);
    const inAfter = Object.hasOwn(after, path);
    const status = !inBefore ? "added" : !inAfter ? "removed" : before[path] === after[path] ? "same" : "changed";
    return { path, status, ops: status === "same" ? [] : lineDiff(before[path], after[path]) };
  });
}
