import { resetInLedgerTime } from '../../shared/ledger/learned-evidence.js';
import {
  inForce,
  type LearnedLimit,
  learnedWindowFor,
  PROVISIONAL_MARGINS,
} from '../../shared/ledger/learned-limits.js';
import {
  holdsAt,
  type LoggedSend,
  liarWindowSeconds,
  type ReportRecord,
  type RunRecord,
  riseBound,
  riseWindowSeconds,
  type VendorLimit,
} from './learned-property-world.js';
import { FAMILY, type Limit, type Scenario } from './learned-scenarios.js';

/**
 * The properties of learned class limits, checked on one run's record (learned-property-world.ts) from the vendor's side:
 * its own log of every request it counted or refused, in ledger time. Pure: the mutants' test runs the same checks
 * against altered rules and expects them to fail.
 *
 * P1  No span of any vendor limit holds more requests than the limit, as the vendor counts them (its sliding spans,
 *     or its fixed windows on its own clock): the vendor serves no request beyond a limit, so a span over it is a
 *     request it refused by that limit, and P1 is about each such refusal. Allowed, and counted: (a) requests
 *     sent before the limit was first named by an honest answer whose report reached the ledger ("unnamed"): in
 *     flight when the naming answer came back, so at most one per honest caller, and one more per honest report
 *     of it that was lost; (b) requests sent while a rise trial of the class was on (R2: one request a window
 *     above a kept limit; R4: the first 429 ends it, so at most one refused per trial and honest caller in
 *     flight); (c) requests sent after one caller's word on it lapsed (T2: "a limit only one caller has named
 *     may so lapse after a pause and be named again by the next answer"), precisely: the learned item then held
 *     no limit in force as tight as the vendor's (no more over a window at least as long), and the last honest
 *     report naming it was more than T2's least end behind (half the window its reset implies at least (I3 a),
 *     plus three margins: what the contract says that report's word lasts at the least, T3 writing a renewal
 *     only when it moves the end by half a window or more) ("lapsed"); as in (a), at most one per honest caller and lost report of it in each
 *     such lapse (the requests in flight when the answer naming it again came back). A general limit is
 *     configured: named from the start, no trial lifts it, nothing lapses.
 * P2a A liar makes the class no looser than the honest evidence: P1 holds with it in the run (no allowance is
 *     the liar's); a kept limit it taught names a limit an honest caller reported (T4: only the same limit
 *     corroborates); and a rise trial begins only after an honest report of a larger limit within the kept
 *     limit's window (R1: a liar cannot start one).
 * P2b A liar's word is gone a window and three margins after its last report (T2): the window being the longest
 *     of the limits it taught (as the learned item showed them), the general window its report named, or the
 *     class's longest ring then (its vendor caps and holds land on one: vendor-caps.ts); then
 *     `ledger.learned` lists none of its limits, and after a quiet spell (no grant for the longest window) an ask
 *     is granted.
 * P3  Use: once the family's limits are named (and any liar's word, change or rise is a settle time behind), in
 *     the longest busy stretch that follows, the requests the vendor served are at least 90 % of the most any
 *     scheduler could have sent there under the vendor's limits (sliding reading, from the vendor's log before
 *     it: `capacityWithHistory`), each window held the margin or C1's reading slack longer, whichever is more
 *     (the ledger's design, not a loss: `readingSlackMs`). Only families of common windows (learned exactly), and stretches whose
 *     capacity is at least 10 requests (so that 90 % allows one less); the others are counted as excluded.
 * P4  Rise: after the vendor raised a limit, once two honest callers reported it, `ledger.learned` lists it kept
 *     within `riseBound` (learned-property-world.ts), where the rules can adopt it: two honest callers, demand all along,
 *     the class used above the old limit, no 429 of the class reported meanwhile (R4), no rise blocked before.
 */

export const USE_FLOOR = 0.9;
export const MIN_CAPACITY = 10;

export interface Allowances {
  /** P1 (a): requests refused by a limit not named yet, per limit with any. */
  unnamed: number[];
  /** P1 (c): requests refused by a limit whose one caller's word had lapsed (T2), per lapse with any. */
  lapsed: number[];
  /** P1 (b): requests refused by a family limit during a rise trial, and the trials. */
  trial: number;
  trials: number;
  /** Requests the vendor refused during a trial. */
  refusedInTrials: number;
}

export type Measure<T> = { measured: T } | { excluded: string } | undefined;

export interface RunVerdict {
  violations: string[];
  /** P1's spans over their limit: the limit and the last send counted. */
  over: { limit: VendorLimit; at: number }[];
  allowances: Allowances;
  use: Measure<{ use: number; capacity: number; served: number; from: number; to: number }>;
  rise: Measure<{ adoptedWithinMs: number; boundMs: number; listedAtBound: boolean | undefined }>;
  quiet: { checks: number; asked: number };
}

export function checkRun(record: RunRecord): RunVerdict {
  const violations: string[] = [];
  const overs: RunVerdict['over'] = [];
  const trials = trialsOf(record);
  const allowances: Allowances = {
    unnamed: [],
    lapsed: [],
    trial: 0,
    trials: trials.length,
    refusedInTrials: 0,
  };
  const inTrial = (t: number) => trials.find((trial) => trial.since <= t && t < trial.until);
  const sends = [...record.sends].sort((a, b) => a.at - b.at);

  // P1, every vendor limit: what the vendor refused by it, and whether the ledger could have known.
  for (const limit of record.vendorLimits) {
    const named = namedAt(record, limit);
    // Sent before the naming answer reached the ledger: earlier, or in the same millisecond (the run's clock stands
    // still while a report is written, so a grant of that millisecond may have been decided before it landed; and
    // a caller of no latency sends the very request the answer is to in it).
    const before = (t: number) => t <= named;
    const refused = sends.filter((s) => s.at >= limit.from && s.at < limit.to && refusedBy(s, limit));
    const unnamed = refused.filter((s) => before(s.at));
    if (unnamed.length > 0) allowances.unnamed.push(unnamed.length);
    // In flight when the answer naming it came back: one request per honest caller, and one more per honest
    // report of it that was lost (the ledger unavailable).
    const lost = record.honestReports.filter(
      (r) => !r.reached && r.limit === limit.limit && r.at < named,
    ).length;
    if (unnamed.length > record.scenario.callers.length + lost)
      violations.push(
        `P1: ${labelOf(limit)} refused ${unnamed.length} requests before it was named (at most one per honest caller and lost report)`,
      );
    /** Per lapse (the last naming report before it): its refusals. */
    const lapses = new Map<ReportRecord, number[]>();
    for (const send of refused) {
      if (before(send.at)) continue;
      if (limit.family && inTrial(send.at)) {
        allowances.trial++;
        continue;
      }
      const lapse = limit.family ? lapsedAt(record, limit, send.at) : undefined;
      if (lapse) {
        lapses.set(lapse, [...(lapses.get(lapse) ?? []), send.at]);
        continue;
      }
      overs.push({ limit, at: send.at });
      violations.push(
        `P1: ${labelOf(limit)} refused a request ${at(record, send.at)}, named ${at(record, named)}${inTrial(send.at) ? ' (in a trial)' : ''}`,
      );
    }
    for (const [naming, times] of lapses) {
      allowances.lapsed.push(times.length);
      // In flight when the answer naming it again came back, as before it was first named.
      const lost = record.honestReports.filter(
        (r) => !r.reached && r.limit === limit.limit && r.at > naming.at && r.at <= Math.max(...times),
      ).length;
      if (times.length > record.scenario.callers.length + lost)
        violations.push(
          `P1: ${labelOf(limit)} refused ${times.length} requests after its word lapsed ${at(record, naming.at)} (at most one per honest caller and lost report)`,
        );
    }
  }
  allowances.refusedInTrials = sends.filter((s) => !s.served && inTrial(s.at)).length;
  for (const trial of trials) {
    const refused = sends.filter((s) => !s.served && trial.since <= s.at && s.at < trial.until).length;
    // R4: the first 429 of the trial ends it; others may be in flight, one per other honest caller.
    if (refused > record.scenario.callers.length)
      violations.push(`P1: ${refused} refused sends in the trial of ${trial.limit}/${trial.windowSeconds}s`);
  }

  // P2a.
  for (const trial of trials) {
    const evidence = record.honestReports.some(
      (r) =>
        r.reached &&
        !r.refused &&
        r.limit > trial.limit &&
        r.at <= trial.since &&
        r.at >= trial.since - trial.windowSeconds * 1000,
    );
    if (!evidence)
      violations.push(
        `P2a: a trial of ${trial.limit}/${trial.windowSeconds}s began ${at(record, trial.since)} with no honest report of a larger limit within its window`,
      );
  }
  const honestLimits = new Set(record.honestReports.filter((r) => r.reached).map((r) => r.limit));
  // T4 keeps only the limit an honest caller named; a rise (R3) the least of its callers' (no looser than one
  // an honest caller reported).
  for (const observation of record.observations)
    for (const l of observation.classes[FAMILY] ?? [])
      if (
        l.by === record.liarTag &&
        l.until === undefined &&
        !(l.raisedFrom === undefined
          ? honestLimits.has(l.limit)
          : [...honestLimits].some((h) => h >= l.limit))
      )
        violations.push(`P2a: the liar's ${l.limit}/${l.windowSeconds}s kept ${at(record, observation.at)}`);

  // P2b.
  for (const check of record.quietChecks) {
    if (check.liarLimits.length > 0)
      violations.push(
        `P2b: ${at(record, check.at)} the class still held the liar's ${check.liarLimits.map(labelOf).join(', ')}`,
      );
    if (check.quiet && check.granted === false)
      violations.push(`P2b: ${at(record, check.at)} an ask after a quiet spell was denied (${check.reason})`);
  }

  const use = useOf(record, sends);
  if (use && 'measured' in use && use.measured.use < USE_FLOOR)
    violations.push(
      `P3: served ${use.measured.served} of a capacity of ${use.measured.capacity} (${Math.round(use.measured.use * 100)} %)`,
    );
  const rise = riseOf(record);
  if (rise && 'measured' in rise) {
    const { adoptedWithinMs, boundMs, listedAtBound } = rise.measured;
    if (adoptedWithinMs > boundMs || listedAtBound === false)
      violations.push(
        `P4: the raised limit was kept ${Number.isFinite(adoptedWithinMs) ? `${(adoptedWithinMs / 1000).toFixed(1)} s` : 'never'} after the second honest report, bound ${(boundMs / 1000).toFixed(1)} s (ledger.learned listed then: ${record.riseCheck?.listed.map(labelOf).join(', ') ?? 'the run had ended'})`,
      );
  }
  return {
    violations,
    over: overs,
    allowances,
    use,
    rise,
    quiet: {
      checks: record.quietChecks.length,
      asked: record.quietChecks.filter((c) => c.granted !== undefined).length,
    },
  };
}

const labelOf = (l: Limit | VendorLimit): string =>
  `${'family' in l ? (l.family ? `${FAMILY} ` : 'general ') : ''}${l.limit}/${l.windowSeconds}s`;
const at = (record: RunRecord, t: number): string =>
  Number.isFinite(t) ? `at +${((t - record.start) / 1000).toFixed(3)} s` : t > 0 ? 'never' : 'configured';

/**
 * When a vendor limit was first named by an honest answer whose report reached the ledger (a general limit: from
 * the start, the settings name it); Infinity when never. Every limit has a value of its own (learned-scenarios.ts).
 */
export function namedAt(record: Pick<RunRecord, 'honestReports'>, limit: VendorLimit): number {
  if (!limit.family) return Number.NEGATIVE_INFINITY;
  return Math.min(
    Number.POSITIVE_INFINITY,
    ...record.honestReports
      .filter((r) => r.reached && r.limit === limit.limit && r.at >= limit.from)
      .map((r) => r.at),
  );
}

/**
 * P1 (c): whether a request sent at `t` and refused by the family limit `limit` was sent after one caller's word
 * on it lapsed (T2): the learned item then held no limit in force as tight as it, and the last honest report
 * naming it (reached, while it was the vendor's) was further behind than the least T2 lets its word last. That
 * report when so (the lapse the request is counted in), else undefined.
 */
export function lapsedAt(
  record: Pick<RunRecord, 'honestReports' | 'observations' | 'measuredOffset' | 'marginMs'>,
  limit: VendorLimit,
  t: number,
): ReportRecord | undefined {
  const item = learnedItemAt(record, t);
  if (inForce(item, t).some((l) => l.limit <= limit.limit && l.windowSeconds >= limit.windowSeconds))
    return undefined;
  const naming = record.honestReports
    .filter((r) => r.reached && r.limit === limit.limit && r.at >= limit.from && r.at <= t)
    .at(-1);
  if (!naming) return undefined;
  // T2's least end of that report's word: half its window (T3 writes a renewal only when it moves the end by half
  // a window or more, so a report that would move it less leaves it at least that long after the report) plus
  // three margins, its window at least what its reset certainly leaves (I3 a).
  const reset = resetInLedgerTime(naming.reset, record.measuredOffset);
  const windowMs = learnedWindowFor(Math.max(1, Math.ceil((reset.earliest - naming.at) / 1000))) * 1000;
  const leastEnd = naming.at + windowMs / 2 + PROVISIONAL_MARGINS * record.marginMs;
  return t >= leastEnd ? naming : undefined;
}

/**
 * When the class last learned the family limit `limit` from its shorter limits' history (-Infinity: never): the
 * last honest report naming it (reached, while it was the vendor's) that found the learned item holding no limit in
 * force of a window as long. Its first naming, or one after one caller's word on it lapsed (T2) with no longer
 * limit in force: the class is then where it was without it, and the ring of its window starts, as at its first
 * learning, with the grants of the class's shorter rings at the latest times they allow (docs/class-limits.md,
 * "How learning uses a report", 1: a safe guess, which may hold the class longer than the vendor does). A window
 * a longer ring covers starts with that ring's grants instead (M3), as they were.
 */
export function learnedLastAt(
  record: Pick<RunRecord, 'honestReports' | 'observations'>,
  limit: VendorLimit,
): number {
  const learning = record.honestReports.filter(
    (r) =>
      r.reached &&
      r.limit === limit.limit &&
      r.at >= limit.from &&
      !inForce(learnedItemAt(record, r.at - 1), r.at).some(
        (l) => l.windowSeconds >= learnedWindowFor(limit.windowSeconds),
      ),
  );
  return learning.at(-1)?.at ?? Number.NEGATIVE_INFINITY;
}

/** The class's learned limits as the item held them at `t`: its newest version observed by then. */
function learnedItemAt(record: Pick<RunRecord, 'observations'>, t: number): LearnedLimit[] {
  let newest: RunRecord['observations'][number] | undefined;
  for (const o of record.observations)
    if (o.at <= t && (newest === undefined || o.version >= newest.version)) newest = o;
  return newest?.classes[FAMILY] ?? [];
}

/** The vendor refused `send` by `limit` (a family's or a general one). */
const refusedBy = (send: LoggedSend, limit: VendorLimit): boolean =>
  !send.served &&
  send.refusedBy?.limit === limit.limit &&
  send.refusedBy.windowSeconds === limit.windowSeconds &&
  (send.refusedBy.family !== undefined) === limit.family;

interface Trial {
  limit: number;
  windowSeconds: number;
  since: number;
  until: number;
}

/** The rise trials of the class, from the learned item as observed: from trialSince until an observation without it. */
export function trialsOf(record: Pick<RunRecord, 'observations' | 'end'>): Trial[] {
  const trials = new Map<string, Trial>();
  let version = 0;
  for (const observation of [...record.observations].sort((a, b) => a.at - b.at || a.version - b.version)) {
    if (observation.version < version) continue;
    version = observation.version;
    const present = new Set<string>();
    for (const rise of observation.rises[FAMILY] ?? []) {
      if (rise.trialSince === undefined) continue;
      const key = `${rise.limit}/${rise.windowSeconds}/${rise.trialSince}`;
      present.add(key);
      if (!trials.has(key))
        trials.set(key, {
          limit: rise.limit,
          windowSeconds: rise.windowSeconds,
          since: rise.trialSince,
          until: Number.POSITIVE_INFINITY,
        });
    }
    for (const [key, trial] of trials)
      if (!present.has(key) && trial.until === Number.POSITIVE_INFINITY) trial.until = observation.at;
  }
  return [...trials.values()].map((t) => ({ ...t, until: Math.min(t.until, record.end) }));
}

/**
 * The most requests any scheduler could have sent in [from, to] under `limits` (every span of a limit's window
 * holding at most its limit), after the requests `history` already sent: each as early as the limits allow, which
 * is optimal (the greedy of local/soak-report.ts mostAllowed, with a past).
 */
export function capacityWithHistory(
  limits: readonly Limit[],
  history: readonly number[],
  from: number,
  to: number,
): number {
  const times = [...history].sort((a, b) => a - b);
  const before = times.length;
  for (;;) {
    let t = Math.max(from, times.at(-1) ?? from);
    for (const { limit, windowSeconds } of limits) {
      const back = times[times.length - limit];
      if (back !== undefined) t = Math.max(t, back + windowSeconds * 1000);
    }
    if (t > to) return times.length - before;
    times.push(t);
  }
}

/**
 * How much later than the vendor frees room a cap of an honest answer may end (C1): its reset `R` is a whole
 * second rounded up, read at its latest `R − oLo` with the vendor's clock `offsetMs` ahead of ours, so up to
 * 1 s + (offsetMs − oLo) after the vendor's own reset.
 */
export const readingSlackMs = (record: Pick<RunRecord, 'offsetMs' | 'measuredOffset'>): number =>
  1000 + Math.max(0, record.offsetMs - record.measuredOffset.lo);

/**
 * The most a denial's wait is spread (docs/vend-api.md, "How long a denial says to wait": up to 1 % of the set's
 * shortest general window, at most 1 s), which the run's callers wait: so that callers told to wait do not come
 * back together. Beside the family's windows of a few seconds it is no small part of a window.
 */
export const hintSpreadMs = (scenario: Pick<Scenario, 'general'>): number =>
  Math.min(1000, 10 * Math.min(...scenario.general.map((g) => g.windowSeconds)));

/** The phases' busy spans, in ledger time. */
function busySpans(record: RunRecord): { from: number; to: number }[] {
  const spans: { from: number; to: number }[] = [];
  let from = record.start;
  for (const phase of record.scenario.phases) {
    const to = from + phase.seconds * 1000;
    if (phase.busy) spans.push({ from, to: Math.min(to, record.end) });
    from = to;
  }
  return spans;
}

/** P3: what the honest callers got of the capacity, after learning (or why the run does not tell). */
function useOf(record: RunRecord, sends: readonly LoggedSend[]): RunVerdict['use'] {
  const { scenario, marginMs } = record;
  if (!scenario.exact) return { excluded: 'a window of no common length' };
  const final = record.vendorLimits.filter((l) => l.to === record.end);
  const family = final.filter((l) => l.family);
  const named = family.map((l) => namedAt(record, l)).filter(Number.isFinite);
  if (named.length === 0) return { excluded: 'never learned' };
  const longest = Math.max(...family.map((l) => learnedWindowFor(l.windowSeconds))) * 1000;
  // Learned again after one caller's word on it lapsed (T2), from the shorter rings: from then, as from its first
  // naming.
  const after = [Math.max(...named, ...family.map((l) => learnedLastAt(record, l)))];
  if (scenario.liar && record.liarReports.length > 0) {
    const last = Math.max(...record.liarReports.map((r) => r.at));
    const general = Math.max(...scenario.general.map((g) => g.windowSeconds));
    after.push(last + Math.max(liarWindowSeconds(record), general) * 1000);
  }
  if (scenario.change) {
    after.push(record.start + scenario.change.atSeconds * 1000 + longest);
    if (scenario.change.to > (scenario.family[scenario.change.index] as Limit).limit) {
      const window = riseWindowSeconds(record, scenario);
      const adopted = record.observations.find((o) =>
        holdsAt(o.classes[FAMILY] ?? [], scenario.change?.to ?? 0, window, o.at),
      );
      if (!adopted) return { excluded: 'a rise not adopted' };
      after.push(adopted.at);
    }
  }
  const settled = Math.max(...after) + longest + 3 * marginMs;
  const stretch = busySpans(record)
    .map(({ from, to }) => ({ from: Math.max(from, settled), to }))
    .filter(({ from, to }) => to > from)
    .sort((a, b) => b.to - b.from - (a.to - a.from))[0];
  if (!stretch) return { excluded: 'no busy stretch after learning' };
  const served = sends.filter((s) => s.served);
  const history = served.filter((s) => s.at < stretch.from).map((s) => s.at);
  // The ledger's promise is the vendor's limits each held over its window plus the margin (docs/design.md): that
  // much is its design, not a loss (at most 4 % here: learned-property-world.ts marginMsOf). And a window's answers
  // hold it to the latest their reset can mean (C1: a cap "r more until E", E = R − oLo): up to the header's whole
  // second and the offset interval's low side (the true offset less oLo) after the vendor frees room, every
  // window the class fills. Whichever is longer; and the callers come back when a denial says, which is spread
  // (hintSpreadMs).
  const widened = final.map((l) => ({
    limit: l.limit,
    windowSeconds:
      l.windowSeconds + (Math.max(marginMs, readingSlackMs(record)) + hintSpreadMs(scenario)) / 1000,
  }));
  const capacity = capacityWithHistory(widened, history, stretch.from, stretch.to);
  if (capacity < MIN_CAPACITY) return { excluded: 'too short to measure' };
  const got = served.filter((s) => s.at >= stretch.from && s.at <= stretch.to).length;
  return { measured: { use: got / capacity, capacity, served: got, from: stretch.from, to: stretch.to } };
}

/**
 * P4: how long after the second honest caller's report of a raised limit it was kept (Infinity: not by the end of
 * the run), against the bound (or why the run does not tell).
 */
function riseOf(record: RunRecord): RunVerdict['rise'] {
  const { scenario } = record;
  const change = scenario.change;
  const before = change && (scenario.family[change.index] as Limit);
  if (!change || !before || change.to <= before.limit) return undefined;
  if (scenario.callers.length < 2) return { excluded: 'one honest caller' };
  const second = record.riseSecondReportAt;
  if (second === undefined) return { excluded: 'not reported by two honest callers' };
  const window = riseWindowSeconds(record, scenario);
  const boundMs = riseBound(window, record.marginMs);
  const adopted = record.observations.find(
    (o) => o.at >= second && holdsAt(o.classes[FAMILY] ?? [], change.to, window, o.at),
  );
  const adoptedWithinMs = adopted ? adopted.at - second : Number.POSITIVE_INFINITY;
  const check = record.riseCheck;
  if (!check && !adopted) return { excluded: 'the run ended first' };
  const until = Math.min(record.end, second + boundMs);
  if (
    !busySpans(record).some(({ from, to }) => from <= record.start + change.atSeconds * 1000 && to >= until)
  )
    return { excluded: 'idle meanwhile' };
  const refused = [...record.honestReports, ...record.liarReports].some(
    (r) => r.reached && r.refused && r.at >= second - before.windowSeconds * 1000 && r.at <= until,
  );
  if (refused) return { excluded: 'a 429 of the class reported (R4)' };
  const blocked = record.observations.some(
    (o) =>
      o.at <= until &&
      (o.rises[FAMILY] ?? []).some((r) => r.blockedUntil !== undefined && r.blockedUntil > second),
  );
  if (blocked) return { excluded: 'a rise blocked (R4)' };
  // The vendor's other limits let more than the old limit through in its window: the class can be used above it.
  const others = record.vendorLimits.filter(
    (l) => l.to === record.end && !(l.family && l.index === change.index),
  );
  if (capacityWithHistory(others, [], 0, before.windowSeconds * 1000 - 1) <= before.limit)
    return { excluded: 'the other limits allow no more than the old one' };
  // What `ledger.learned` listed at the bound agrees with the learned item (when the run lasted that long).
  return { measured: { adoptedWithinMs, boundMs, listedAtBound: check ? check.adopted : undefined } };
}
