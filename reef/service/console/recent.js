// Recent records without reading a scenario's whole history. The records route pages oldest first by
// `after_sequence`, so the first record of the last hour is found by a galloping then binary search over the
// cursor with `limit=1` (about 2·log2(N) tiny requests), and only the records after it are paged and counted.

import { api, enc } from "./api.js";

const PAGE = 1000;
const MAX_PAGES = 5; // beyond 5,000 recent records the overview says "≥ 5000"

async function firstAfter(scenario, sequence) {
  const page = await api(`/reef/scenarios/${enc(scenario)}/records`, { params: { after_sequence: sequence, limit: 1 } });
  return page.records[0] || null;
}

/** The cursor after which every record of `scenario` was created at or after `since` (epoch seconds). */
export async function cursorSince(scenario, since) {
  const recent = (record) => record === null || record.created_at >= since;
  const first = await firstAfter(scenario, 0);
  if (recent(first)) return 0;
  // Invariant: the first record after `low` is old; the first after `high` is recent or absent.
  let low = first.sequence - 1;
  let high;
  for (let stride = PAGE; ; stride *= 2) {
    const probe = await firstAfter(scenario, low + stride);
    if (recent(probe)) {
      high = low + stride;
      break;
    }
    low = probe.sequence - 1;
  }
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    const probe = await firstAfter(scenario, middle);
    if (recent(probe)) high = middle;
    else low = Math.max(middle, probe.sequence - 1);
  }
  return high;
}

/** `{inference, report, capped}`: how many records of each type `scenario` stored since `since`. */
export async function countSince(scenario, since) {
  const counts = { inference: 0, report: 0, capped: false };
  let cursor = await cursorSince(scenario, since);
  for (let pages = 0; cursor !== null; pages++) {
    if (pages === MAX_PAGES) {
      counts.capped = true;
      break;
    }
    const page = await api(`/reef/scenarios/${enc(scenario)}/records`, { params: { after_sequence: cursor, limit: PAGE } });
    for (const record of page.records) {
      if (record.created_at >= since && record.request_type in counts) counts[record.request_type]++;
    }
    cursor = page.next_after_sequence;
  }
  return counts;
}
