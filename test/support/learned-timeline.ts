import type { RunRecord } from './learned-property-world.js';
import { FAMILY } from './learned-scenarios.js';

/**
 * One run as a timeline (seconds from its start, ledger time): grants, what the vendor did with each request,
 * the reports and what the learned item held after them. What a counterexample is read with
 * (LEARNED_PROPERTY_REPLAY, test/classes-learned-property.test.ts).
 */
export function timelineOf(record: RunRecord): string {
  const s = (t: number) => ((t - record.start) / 1000).toFixed(3).padStart(8);
  const lines: [number, number, string][] = [];
  const add = (at: number, text: string) => lines.push([at, lines.length, text]);
  const { scenario } = record;
  const resetIn = (r: { reset: number; at: number }) =>
    ((r.reset * 1000 - record.offsetMs - r.at) / 1000).toFixed(3);
  for (const g of record.grants) add(g.at, `grant to honest-${g.caller}`);
  for (const at of record.liarGrants ?? []) add(at, 'grant to the liar');
  for (const send of record.sends)
    add(
      send.at,
      `  vendor ${send.served ? 'served' : `429 by ${send.refusedBy?.family ? `${FAMILY} ` : 'general '}${send.refusedBy?.limit}/${send.refusedBy?.windowSeconds}s`}`,
    );
  for (const r of [...record.honestReports, ...record.liarReports])
    add(
      r.at,
      `    ${r.by === record.honestReports.find((h) => h.by === r.by)?.by ? r.by.replace(/.*\//, '') : 'liar'} reports limit ${r.limit}, remaining ${r.remaining}, reset in ${resetIn(r)} s${r.retryAfterSeconds === undefined ? '' : `, 429 Retry-After ${r.retryAfterSeconds}`}${r.reached ? '' : ' (lost: ledger unavailable)'}`,
    );
  let last = '';
  for (const o of record.observations) {
    const limits = (o.classes[FAMILY] ?? [])
      .map(
        (l) =>
          `${l.limit}/${l.windowSeconds}s ${l.until === undefined ? 'kept' : `until ${s(l.until).trim()}`}${l.by === record.liarTag ? ' (liar)' : ''}${l.raisedFrom ? ` raised from ${l.raisedFrom}` : ''}`,
      )
      .join(', ');
    const rises = (o.rises[FAMILY] ?? [])
      .map(
        (r) =>
          `rise of ${r.limit}/${r.windowSeconds}s${r.trialSince === undefined ? '' : ` trial since ${s(r.trialSince).trim()}`}${r.blockedUntil === undefined ? '' : ' blocked'}`,
      )
      .join(', ');
    const text = `      learned v${o.version}: ${limits}${rises ? `; ${rises}` : ''}`;
    if (text.replace(/v\d+/, '') !== last) add(o.at, text);
    last = text.replace(/v\d+/, '');
  }
  for (const q of record.quietChecks)
    add(
      q.at,
      `check P2b: liar's limits listed ${JSON.stringify(q.liarLimits)}, quiet ${q.quiet}${q.granted === undefined ? '' : `, ask ${q.granted ? 'granted' : `denied (${q.reason})`}`}`,
    );
  if (record.riseCheck)
    add(
      record.riseCheck.at,
      `check P4: adopted ${record.riseCheck.adopted}, listed ${JSON.stringify(record.riseCheck.listed)}`,
    );
  if (scenario.change)
    add(
      record.start + scenario.change.atSeconds * 1000,
      `the vendor sets window ${scenario.change.index} to ${scenario.change.to}`,
    );
  lines.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const head = [
    `family ${scenario.family.map((l) => `${l.limit}/${l.windowSeconds}s`).join(', ')} (${scenario.windowKind}), general ${scenario.general.map((l) => `${l.limit}/${l.windowSeconds}s`).join(', ')}, margin ${record.marginMs} ms`,
    `vendor offset ${record.offsetMs} ms, reported as [${record.measuredOffset.lo}, ${record.measuredOffset.hi}]; ${scenario.callers.length} honest caller(s)${scenario.liar ? `, liar ${scenario.liar.strategy}` : ''}`,
  ];
  return [...head, ...lines.map(([at, , text]) => `${s(at)} ${text}`)].join('\n');
}
