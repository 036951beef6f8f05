import { createHash } from 'node:crypto';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Sandbox } from '../../sandbox/index.js';
import { PARTITION_KEY } from '../../shared/aws/tables.js';
import { dateHeaderOffset, type ManualClock } from '../../shared/clock.js';
import { type RateLimitSettings, rateLimitSettingsSchema } from '../../shared/config/credential-sets.js';
import {
  DynamoRateLedger,
  LedgerUnavailableError,
  type PermitDecision,
  type VendorFeedbackReport,
} from '../../shared/ledger/index.js';
import {
  inForce,
  type LearnedClasses,
  type LearnedLimit,
  learnedWindowFor,
  PROBE_LIMIT,
} from '../../shared/ledger/learned-limits.js';
import type { Rises } from '../../shared/ledger/learned-rise.js';
import { callerTag } from '../../shared/ledger/receipts.js';
import { vendorOffsetAtLogin } from '../../shared/tokens/vendor-offset.js';
import { createFaultyDynamoDbClient, type FaultStats } from './faulty-dynamodb.js';
import { durationOf, FAMILY, type Limit, type Scenario } from './learned-scenarios.js';
import { call, login, seededRandom } from './sandbox-http.js';

/**
 * One run of a learned-limits scenario (learned-scenarios.ts) against the real parts: the vendor sandbox over
 * HTTP (its own rate limiter, families, window kinds and clock offset; its request log is what the properties
 * read), a real DynamoRateLedger per honest caller (each a vend process of its own, with its own caches) on a
 * DynamoDB engine through a client that loses answers of applied writes, throttles and fails, and one
 * ManualClock for both. Events run one at a time in simulated time: an honest caller asks for a permit, sends at
 * once when granted, and reports its answer `latencyMs` later as client/rate-feedback.ts does (once per (token,
 * class, limit, reset) and caller, every 429); a liar reports what its strategy says; the vendor changes a limit.
 * What happened is recorded for the checks (learned-checks.ts): nothing is asserted here.
 */

/**
 * The run's margin: as production sizes it beside its windows (3 s beside a minute: 5 %), 4 % of the family's
 * shortest window, at least 0.25 s. Large enough for what the rules assume of it (T3: an answer reported within
 * two margins, with a denial's retry spread of up to 1 % of the shortest window), small enough for 90 % use.
 */
export const marginMsOf = (scenario: Pick<Scenario, 'family'>): number =>
  Math.max(
    250,
    50 * Math.round((0.04 * 1000 * Math.min(...scenario.family.map((l) => l.windowSeconds))) / 50),
  );
const VALIDITY_MS = 200;
const SET_PREFIX = 'learned-property';
const DAY_MS = 86_400_000;
/** A caller whose ask met no ledger (LedgerUnavailableError) asks again this much later. */
const UNAVAILABLE_RETRY_MS = 200;
const HONEST = (i: number) => `arn:aws:iam::123456789012:role/honest-${i}`;
export const LIAR = 'arn:aws:iam::123456789012:role/liar';

export interface WorldParts {
  clock: ManualClock;
  sandbox: Sandbox;
  /** The engine's endpoint: each run gets a fault-injecting client of its own, seeded by the scenario. */
  endpoint: string;
  tableName: string;
  /** A client without faults, for the operator's reads (`ledger.learned`): a check never fails on a fault. */
  operatorClient: DynamoDBClient;
}

/** A change of the run, to test a mutant of the rules (test/classes-learned-mutants.test.ts). */
export interface WorldOptions {
  /** Reports reach the ledger without the token's vendor clock offset (rule C1 ignored). */
  dropVendorOffset?: boolean;
}

/** A vendor limit over a span of the run: a family window's limit until it changes, or a general one. */
export interface VendorLimit extends Limit {
  family: boolean;
  /** Its index among the family's windows. */
  index: number;
  from: number;
  to: number;
}

export interface LoggedSend {
  /** Ledger time: the vendor's log time less the vendor's offset. */
  at: number;
  served: boolean;
  /** The limit that refused it (a family's or a general one). */
  refusedBy?: { family?: string; limit: number; windowSeconds: number };
}

export interface ReportRecord {
  /** When it reached the ledger (ledger time), and when the answer it is about was sent. */
  at: number;
  sentAt: number;
  by: string;
  limit: number;
  remaining: number;
  /** Vendor clock, Unix seconds. */
  reset: number;
  refused: boolean;
  retryAfterSeconds?: number;
  /** reportVendorFeedback returned (else the ledger was unavailable: the report was lost). */
  reached: boolean;
}

/** The learned item as one of its reads or writes showed it. */
export interface LearnedObservation {
  at: number;
  version: number;
  classes: LearnedClasses;
  rises: Rises;
}

export interface QuietCheck {
  at: number;
  /** The liar's provisional limits (its word alone) the operator's `ledger.learned` still listed then. */
  liarLimits: Limit[];
  /** No grant of the class since `at - quietMs`: an ask must be granted. */
  quiet: boolean;
  granted?: boolean;
  reason?: string;
}

export interface RiseCheck {
  /** The second honest caller's report of the raised limit, and the check `boundMs` later. */
  secondReportAt: number;
  at: number;
  adopted: boolean;
  listed: Limit[];
}

export interface RunRecord {
  scenario: Scenario;
  start: number;
  end: number;
  offsetMs: number;
  /** The offset interval the reports carried (as a refresher measured it at login). */
  measuredOffset: { lo: number; hi: number };
  marginMs: number;
  limits: RateLimitSettings;
  vendorLimits: VendorLimit[];
  sends: LoggedSend[];
  grants: { at: number; caller: number }[];
  /** The liar's permits (never sent: what it reports is made up). */
  liarGrants: number[];
  honestReports: ReportRecord[];
  liarReports: ReportRecord[];
  observations: LearnedObservation[];
  quietChecks: QuietCheck[];
  /** P4: the second honest caller's report of a raised limit, and the check `riseBound` after it (if in the run). */
  riseSecondReportAt?: number;
  riseCheck?: RiseCheck;
  /** Asks that met no ledger (LedgerUnavailableError). */
  unavailable: number;
  faults: Pick<FaultStats, 'lostAnswer' | 'throttle' | 'serverError' | 'sent'>;
  liarTag: string;
}

interface Event {
  at: number;
  seq: number;
  run(): Promise<void>;
}

let runs = 0;

export async function runScenario(
  parts: WorldParts,
  scenario: Scenario,
  options: WorldOptions = {},
): Promise<RunRecord> {
  const { clock, sandbox } = parts;
  const setId = `${SET_PREFIX}-${process.pid}-${++runs}`;
  const marginMs = marginMsOf(scenario);
  const limits = rateLimitSettingsSchema.parse({
    general: scenario.general,
    classes: { [FAMILY]: [] },
    marginSeconds: marginMs / 1000,
    permitValiditySeconds: VALIDITY_MS / 1000,
  });
  const familyOf = (family: readonly Limit[]) => [
    { name: FAMILY, pathPrefix: `/${FAMILY}/`, limits: [...family] },
  ];
  sandbox.update({
    limits: scenario.general,
    families: familyOf(scenario.family),
    windowKind: scenario.windowKind,
    clockOffsetSeconds: scenario.offsetMs / 1000,
    recordRequests: true,
  });
  sandbox.resetStats();
  // Past every window of the last run, at the same time of day (the ledger's ring slots and the vendor's windows
  // align with it: a scenario replays alike), then the scenario's place in the vendor's fixed windows.
  await clock.advance(2 * DAY_MS - (clock.now() % DAY_MS) + scenario.phaseMs);

  // The token, and its vendor clock offset as the refresher measures it at login (the Date header's whole second
  // and the round trip: shared/tokens/vendor-offset.ts).
  const loggedIn = await login(sandbox.url, 'uat-advisor', 'uat-advisor-sandbox-pw');
  if (loggedIn.status !== 200) throw new Error(`login answered ${loggedIn.status}`);
  const token = loggedIn.body.accessToken as string;
  const vendorDate = Date.parse(loggedIn.headers.get('date') ?? '');
  const skew = dateHeaderOffset(
    vendorDate,
    clock.now() - scenario.login.beforeMs,
    clock.now() + scenario.login.afterMs,
  );
  const measuredOffset = vendorOffsetAtLogin({ least: skew.lo, most: skew.hi }, undefined);
  const tokenId = createHash('sha256').update(token).digest('hex').slice(0, 16);
  await clock.advance(scenario.login.afterMs + 1);

  const faulty = createFaultyDynamoDbClient({ endpoint: parts.endpoint, seed: scenario.seed });
  const observations: LearnedObservation[] = [];
  observeLearnedItem(faulty.client, setId, clock, observations);
  const random = seededRandom(scenario.seed);
  const ledgerOn = (client: DynamoDBClient) =>
    new DynamoRateLedger({ client, tableName: parts.tableName, clock, conflictJitterMs: 1, random });
  const honest = scenario.callers.map(() => ledgerOn(faulty.client));
  const liarLedger = ledgerOn(faulty.client);
  const operator = ledgerOn(parts.operatorClient);

  const start = clock.now();
  const end = start + durationOf(scenario) * 1000;
  const record: RunRecord = {
    scenario,
    start,
    end,
    offsetMs: scenario.offsetMs,
    measuredOffset,
    marginMs: marginMs,
    limits,
    vendorLimits: vendorLimitsOf(scenario, start, end),
    sends: [],
    grants: [],
    liarGrants: [],
    honestReports: [],
    liarReports: [],
    observations,
    quietChecks: [],
    unavailable: 0,
    faults: { lostAnswer: 0, throttle: 0, serverError: 0, sent: 0 },
    liarTag: callerTag(LIAR),
  };

  const queue: Event[] = [];
  let seq = 0;
  const schedule = (at: number, run: Event['run']) => {
    if (at <= end) queue.push({ at: Math.max(at, clock.now()), seq: seq++, run });
  };
  /** The start of the phase `t` is in when busy, else of the next busy one (Infinity: none). */
  const busyFrom = (t: number): number => {
    let from = start;
    for (const phase of scenario.phases) {
      const to = from + phase.seconds * 1000;
      if (phase.busy && t < to) return Math.max(t, from);
      from = to;
    }
    return Number.POSITIVE_INFINITY;
  };

  const report = async (
    ledger: DynamoRateLedger,
    caller: string,
    fields: Omit<VendorFeedbackReport, 'tokenId' | 'caller' | 'limits' | 'setId' | 'class'>,
  ): Promise<boolean> => {
    try {
      await ledger.reportVendorFeedback({
        tokenId,
        caller,
        limits,
        setId,
        class: FAMILY,
        ...fields,
        ...(options.dropVendorOffset ? {} : { vendorOffsetMs: measuredOffset }),
      });
      return true;
    } catch (error) {
      if (error instanceof LedgerUnavailableError) return false;
      throw error;
    }
  };

  let sent = 0;
  /** One vendor request of the class, at once: its answer comes back `latencyMs` later. */
  const send = async (i: number, sentAt: number) => {
    const reply = await call(sandbox.url, 'GET', `/${FAMILY}/r-${sent++}`, { token });
    const header = (name: string) => Number(reply.headers.get(name));
    const answer = {
      status: reply.status,
      limit: header('x-ratelimit-limit'),
      remaining: header('x-ratelimit-remaining'),
      reset: header('x-ratelimit-reset'),
      retryAfter: reply.status === 429 ? header('retry-after') : undefined,
    };
    schedule(sentAt + (scenario.callers[i]?.latencyMs ?? 0), () => answered(i, sentAt, answer));
  };

  // Rise checks (P4): the distinct honest callers that reported the raised limit, once it changed.
  const change = scenario.change;
  const raised = change && change.to > (scenario.family[change.index] as Limit).limit ? change : undefined;
  const raisedBy = new Set<number>();

  const reported = scenario.callers.map(() => new Set<string>());
  async function answered(
    i: number,
    sentAt: number,
    answer: {
      status: number;
      limit: number;
      remaining: number;
      reset: number;
      retryAfter?: number | undefined;
    },
  ) {
    const key = `${answer.limit}|${answer.reset}`;
    const refused = answer.status === 429;
    if (refused || !reported[i]?.has(key)) {
      reported[i]?.add(key);
      const fields = {
        limit: answer.limit,
        remaining: answer.remaining,
        reset: answer.reset,
        ...(answer.retryAfter === undefined ? {} : { retryAfterSeconds: answer.retryAfter }),
      };
      const reached = await report(honest[i] as DynamoRateLedger, HONEST(i), fields);
      record.honestReports.push({ at: clock.now(), sentAt, by: HONEST(i), refused, reached, ...fields });
      if (
        raised &&
        reached &&
        !refused &&
        answer.limit === raised.to &&
        clock.now() >= start + raised.atSeconds * 1000
      ) {
        raisedBy.add(i);
        if (raisedBy.size === 2 && record.riseSecondReportAt === undefined) {
          const secondReportAt = clock.now();
          record.riseSecondReportAt = secondReportAt;
          const window = riseWindowSeconds(record, scenario);
          schedule(secondReportAt + riseBound(window, marginMs), async () => {
            const listed = (await operator.learned(setId))[FAMILY] ?? [];
            record.riseCheck = {
              secondReportAt,
              at: clock.now(),
              listed: listed.map(({ limit, windowSeconds }) => ({ limit, windowSeconds })),
              adopted: holdsAt(listed, raised.to, window, clock.now()),
            };
          });
        }
      }
    }
    // A 429: the caller itself waits its Retry-After (client/vendor-call.ts).
    const next = clock.now() + (answer.retryAfter ?? 0) * 1000;
    schedule(busyFrom(next), () => ask(i));
  }

  async function ask(i: number) {
    const now = clock.now();
    if (busyFrom(now) > now) {
      schedule(busyFrom(now), () => ask(i));
      return;
    }
    let decision: PermitDecision;
    try {
      decision = await (honest[i] as DynamoRateLedger).acquire({
        tokenId,
        caller: HONEST(i),
        count: 1,
        class: FAMILY,
        limits,
        setId,
      });
    } catch (error) {
      if (!(error instanceof LedgerUnavailableError)) throw error;
      record.unavailable++;
      schedule(now + UNAVAILABLE_RETRY_MS, () => ask(i));
      return;
    }
    if (!decision.granted) {
      schedule(now + decision.retryAfterMs, () => ask(i));
      return;
    }
    record.grants.push({ at: now, caller: i });
    await send(i, now);
  }

  const liar = scenario.liar;
  if (liar) {
    for (let j = 0; j < liar.reports; j++) {
      const at = start + liar.startSeconds * 1000 + j * liar.everyMs;
      const last = j === liar.reports - 1;
      schedule(at, async () => {
        // A consumer of the broker: it asks for a permit of the class, as any caller, and lies about the answer
        // (I2: a report teaches only right after the ledger granted the class). It never sends the request.
        const permit = await liarLedger
          .acquire({ tokenId, caller: LIAR, count: 1, class: FAMILY, limits, setId })
          .catch((error: unknown) => {
            if (error instanceof LedgerUnavailableError) return undefined;
            throw error;
          });
        if (permit?.granted) record.liarGrants.push(clock.now());
        const fields = liarReport(scenario, liar, j, Math.floor((clock.now() + scenario.offsetMs) / 1000));
        const reached = await report(liarLedger, LIAR, fields);
        record.liarReports.push({
          at: clock.now(),
          sentAt: clock.now(),
          by: LIAR,
          refused: fields.retryAfterSeconds !== undefined,
          reached,
          ...fields,
        });
        if (last) scheduleQuietCheck();
      });
    }
  }

  /**
   * P2b: the liar's word is gone a window and three margins after its last report (the longest window its
   * limits had, the general window it named, or the class ring its caps and holds land on), and an ask after a
   * quiet spell is granted.
   */
  function scheduleQuietCheck() {
    const taught = liarWindowSeconds(record);
    const named = record.liarReports.some((r) => scenario.general.some((g) => g.limit === r.limit))
      ? Math.max(...scenario.general.map((g) => g.windowSeconds))
      : 0;
    // Its vendor caps and holds too (vendor-caps.ts): each on a ring of the class, held at most that ring's window
    // and margin; the class's rings are its limits in force then (the longest), or the probe's.
    const rings = Math.max(
      PROBE_LIMIT.windowSeconds,
      ...(record.observations.at(-1)?.classes[FAMILY] ?? []).map((l) => l.windowSeconds),
    );
    // And the window its reports named: a reset on the vendor's clock, at the latest the reported offset allows
    // (T2: the latest reading of the reset; H1: a class hold lasts at most as long).
    const named429 = Math.max(...record.liarReports.map((r) => r.reset * 1000 - measuredOffset.lo));
    const at = Math.max(clock.now() + Math.max(taught, named, rings) * 1000, named429) + 3 * marginMs + 1;
    const quietMs = quietSpanMs(scenario, marginMs);
    schedule(at, async () => {
      const listed = (await operator.learned(setId))[FAMILY] ?? [];
      const check: QuietCheck = {
        at: clock.now(),
        liarLimits: listed
          // Its word: a limit of its that another caller corroborated (T4) is that caller's word too.
          .filter((l) => l.by === record.liarTag && l.until !== undefined)
          .map(({ limit, windowSeconds }) => ({ limit, windowSeconds })),
        quiet: ![...record.grants.map((g) => g.at), ...record.liarGrants].some(
          (t) => t > clock.now() - quietMs,
        ),
      };
      record.quietChecks.push(check);
      if (!check.quiet) return;
      const decision = await (honest[0] as DynamoRateLedger)
        .acquire({ tokenId, caller: HONEST(0), count: 1, class: FAMILY, limits, setId })
        .catch((error: unknown) => {
          if (error instanceof LedgerUnavailableError) return undefined;
          throw error;
        });
      // The ledger unavailable (a fault): nothing to tell.
      if (!decision) {
        check.quiet = false;
        return;
      }
      check.granted = decision.granted;
      if (!decision.granted) check.reason = decision.reason;
      else {
        record.grants.push({ at: clock.now(), caller: 0 });
        await send(0, clock.now());
      }
    });
  }

  if (change) {
    schedule(start + change.atSeconds * 1000, async () => {
      sandbox.update({ families: familyOf(changedFamily(scenario)) });
    });
  }

  faulty.faults.set(scenario.faults);
  try {
    scenario.callers.forEach((_, i) => {
      schedule(start + i, () => ask(i));
    });
    while (queue.length > 0) {
      queue.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const event = queue.shift() as Event;
      if (event.at > clock.now()) await clock.advance(event.at - clock.now());
      await event.run();
    }
    if (end > clock.now()) await clock.advance(end - clock.now());
  } finally {
    faulty.faults.off();
    const { lostAnswer, throttle, serverError, sent: attempts } = faulty.faults.stats;
    record.faults = { lostAnswer, throttle, serverError, sent: attempts };
    faulty.client.destroy();
  }
  record.sends = sandbox.requestLog().map((entry) => ({
    at: entry.at - scenario.offsetMs,
    served: entry.served,
    ...(entry.refusedBy ? { refusedBy: entry.refusedBy } : {}),
  }));
  return record;
}

/** The family after the scenario's change. */
export const changedFamily = (scenario: Scenario): Limit[] =>
  scenario.family.map((l, k) => (k === scenario.change?.index ? { ...l, limit: scenario.change.to } : l));

/** Every vendor limit with the span it was in force (ledger time). */
function vendorLimitsOf(scenario: Scenario, start: number, end: number): VendorLimit[] {
  const changeAt = scenario.change ? start + scenario.change.atSeconds * 1000 : end;
  const family = scenario.family.flatMap((l, index): VendorLimit[] => {
    if (!scenario.change || scenario.change.index !== index)
      return [{ ...l, family: true, index, from: start, to: end }];
    return [
      { ...l, family: true, index, from: start, to: changeAt },
      { ...l, limit: scenario.change.to, family: true, index, from: changeAt, to: end },
    ];
  });
  const general = scenario.general.map((l, index) => ({ ...l, family: false, index, from: start, to: end }));
  return [...family, ...general];
}

/**
 * P4's bound (docs/class-limits.md R3): adopted within RISE_TRIAL_WINDOWS windows of the trial, begun by the
 * second caller's report, plus one window for the trial's extra request to be granted and reported (the class
 * used above its kept limit, counted from the rings) and four margins.
 */
export const riseBound = (windowSeconds: number, marginMs: number): number =>
  (3 + 1) * windowSeconds * 1000 + 4 * marginMs;

/**
 * The window (s) a rise of the scenario's changed limit is adopted on (R3: `L2/W` kept in place of the kept `L/W`):
 * the window of the kept limit of the old value the class held last before the change, else the common length of
 * the vendor's window. They differ where the class kept that limit over a shorter window than the vendor's (two
 * callers' lower bounds, T4; P1 judges that, not P4).
 */
export function riseWindowSeconds(
  record: Pick<RunRecord, 'observations' | 'start'>,
  scenario: Pick<Scenario, 'family' | 'change'>,
): number {
  const change = scenario.change;
  const before = change && scenario.family[change.index];
  if (!change || !before) return 0;
  let window = learnedWindowFor(before.windowSeconds);
  for (const o of record.observations) {
    if (o.at > record.start + change.atSeconds * 1000) break;
    const kept = (o.classes[FAMILY] ?? []).find((l) => l.until === undefined && l.limit === before.limit);
    if (kept) window = kept.windowSeconds;
  }
  return window;
}

/**
 * A raised limit is adopted when what the set learned holds its window at it: kept (R3's raise, or taught anew and
 * corroborated once the old one lapsed), and nothing in force tighter over that window.
 */
export const holdsAt = (
  limits: readonly LearnedLimit[],
  limit: number,
  windowSeconds: number,
  now: number,
): boolean => {
  const live = inForce(limits, now).filter((l) => l.windowSeconds === windowSeconds);
  return live.some((l) => l.until === undefined && l.limit === limit) && !live.some((l) => l.limit < limit);
};

/** The longest window (s) of the limits the liar taught, as the learned item showed them. */
export function liarWindowSeconds(record: Pick<RunRecord, 'observations' | 'liarTag'>): number {
  return Math.max(
    0,
    ...record.observations.flatMap((o) =>
      (o.classes[FAMILY] ?? []).filter((l) => l.by === record.liarTag).map((l) => l.windowSeconds),
    ),
  );
}

/** After this long without a grant, every ring of the class and the general ones is empty. */
export const quietSpanMs = (scenario: Scenario, marginMs: number): number =>
  (Math.max(
    10,
    ...scenario.family.map((l) => learnedWindowFor(l.windowSeconds)),
    ...scenario.general.map((l) => l.windowSeconds),
  ) +
    1) *
    1000 +
  2 * marginMs;

/** What the liar reports the `j`-th time (vendor time `nowSeconds`), by its strategy. */
function liarReport(
  scenario: Scenario,
  liar: NonNullable<Scenario['liar']>,
  j: number,
  nowSeconds: number,
): { limit: number; remaining: number; reset: number; retryAfterSeconds?: number } {
  const real = scenario.family[liar.index] as Limit;
  const loose = Math.max(real.limit + 1, Math.round((real.limit * liar.factor) / 100));
  const tight = Math.max(1, Math.floor(real.limit / 2));
  switch (liar.strategy) {
    case 'tight':
      return { limit: tight, remaining: 0, reset: nowSeconds + liar.fakeWindowSeconds };
    case 'loose':
      return { limit: loose, remaining: loose - 1, reset: nowSeconds + real.windowSeconds };
    case 'far-reset':
      return { limit: real.limit, remaining: 0, reset: nowSeconds + 86_400 };
    case 'fake-429':
      return {
        limit: j % 2 === 0 ? real.limit : tight + 100,
        remaining: 0,
        reset: nowSeconds + liar.fakeWindowSeconds,
        retryAfterSeconds: liar.retryAfterSeconds,
      };
    case 'alternating': {
      const windows = [5, 60, 600, 3600];
      const reset = nowSeconds + (windows[j % windows.length] as number);
      return j % 2 === 0
        ? { limit: tight, remaining: 0, reset }
        : { limit: loose, remaining: loose - 2, reset };
    }
    case 'general': {
      const general = scenario.general[0] as Limit;
      return {
        limit: general.limit,
        remaining: 0,
        reset: nowSeconds + general.windowSeconds,
        ...(j % 2 === 1 ? { retryAfterSeconds: liar.retryAfterSeconds } : {}),
      };
    }
  }
}

/**
 * Records the set's learned item whenever a read returns it or a write of it succeeds (the observation is the
 * item's: nothing of the ledger's own view).
 */
function observeLearnedItem(
  client: DynamoDBClient,
  setId: string,
  clock: ManualClock,
  observations: LearnedObservation[],
): void {
  const key = `learned#${setId}`;
  const parse = (item: Record<string, { S?: string; N?: string }> | undefined) => {
    if (!item) return;
    observations.push({
      at: clock.now(),
      version: Number(item.v?.N ?? 0),
      classes: JSON.parse(item.c?.S ?? '{}') as LearnedClasses,
      rises: JSON.parse(item.rs?.S ?? '{}') as Rises,
    });
  };
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const result = await next(args);
      const input = args.input as {
        Key?: Record<string, { S?: string }>;
        Item?: Record<string, { S?: string; N?: string }>;
      };
      if (context.commandName === 'GetItemCommand' && input.Key?.[PARTITION_KEY]?.S === key)
        parse((result.output as { Item?: Record<string, { S?: string; N?: string }> }).Item);
      if (context.commandName === 'PutItemCommand' && input.Item?.[PARTITION_KEY]?.S === key)
        parse(input.Item);
      return result;
    },
    { step: 'initialize', name: `observeLearnedItem-${setId}` },
  );
}
