import { type AttributeValue, type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { type Clock, ManualClock } from '../../shared/clock.js';
import type { RateLimitSettings } from '../../shared/config/credential-sets.js';
import type { PermitDecision } from '../../shared/ledger/index.js';
import {
  CARRIED_WRITE_IDS,
  LedgerTable,
  ledgerKey,
  randomWriteId,
  WRITE_IDS_LIMIT,
} from '../../shared/ledger/item/index.js';
import { acquire, stateAt } from '../../shared/ledger/ledger-state.js';
import { allRings, planFor } from '../../shared/ledger/limit-plan.js';
import { callerTag, newReceiptId, newSecret, SPENT_LIMIT } from '../../shared/ledger/receipts.js';

/** Helpers of the rate-ledger tests and benchmark: span checks, the ideal schedule, DynamoDB item size. */

/** The decision, which must be a grant (else the test fails saying why it was not). */
export function granted(decision: PermitDecision): Extract<PermitDecision, { granted: true }> {
  if (!decision.granted) throw new Error(`expected a grant, got ${decision.reason}`);
  return decision;
}

/** The decision, which must be a denial. */
export function denied(decision: PermitDecision): Extract<PermitDecision, { granted: false }> {
  if (decision.granted) throw new Error('expected a denial');
  return decision;
}

/**
 * The property tests' clock: once each of `actors` sleeps on it, moves it by a random step (mostly under a
 * second, sometimes up to 10 s; the clock also moves while requests are in flight), never past `end`; returns at
 * `end` with every actor waiting again.
 */
export async function advanceInRandomSteps(
  clock: ManualClock,
  actors: number,
  end: number,
  random: () => number,
): Promise<void> {
  const everyoneWaiting = async () => {
    while (clock.pendingSleepers < actors) await new Promise((r) => setImmediate(r));
  };
  while (clock.now() < end) {
    await everyoneWaiting();
    const step = random() < 0.98 ? random() * 1000 : 1000 + random() * 9000;
    await clock.advance(Math.max(1, Math.floor(Math.min(step, end - clock.now()))));
  }
  await everyoneWaiting();
}

/**
 * A process's own clock, `offsetMs` off the true (simulated) one: its sleeps are the true clock's (a skewed clock
 * still ticks at the right rate), so `advanceInRandomSteps` counts its sleepers.
 */
export function offsetClock(truth: ManualClock, offsetMs: number): Clock {
  return {
    now: () => truth.now() + offsetMs,
    sleep: (ms, signal) => truth.sleep(ms, signal),
  };
}

export interface TimedCount {
  time: number;
  count: number;
}

/** The most counted in any closed span [a, a + spanMs]. */
export function maxInAnySpan(events: readonly TimedCount[], spanMs: number): number {
  const sorted = [...events].sort((a, b) => a.time - b.time);
  let best = 0;
  let sum = 0;
  let left = 0;
  for (const event of sorted) {
    sum += event.count;
    while ((sorted[left]?.time ?? event.time) < event.time - spanMs) sum -= sorted[left++]?.count ?? 0;
    best = Math.max(best, sum);
  }
  return best;
}

/** Permits that may be sent at any moment of [from, to] (their validity as the consumer sees it). */
export interface SendableCount {
  from: number;
  to: number;
  count: number;
}

/**
 * The most permits a closed span [a, a + spanMs] could see, wherever in its interval each one is sent: the
 * vendor's count at its worst. An interval [from, to] can meet the span iff a lies in [from - spanMs, to].
 */
export function mostSendableInAnySpan(permits: readonly SendableCount[], spanMs: number): number {
  const events = permits.flatMap((p) => [
    { at: p.from - spanMs, delta: p.count },
    { at: p.to, delta: -p.count },
  ]);
  // At equal times the starts first: both ends are closed.
  events.sort((x, y) => x.at - y.at || y.delta - x.delta);
  let open = 0;
  let most = 0;
  for (const event of events) {
    open += event.delta;
    most = Math.max(most, open);
  }
  return most;
}

/**
 * The grant times of the best possible schedule: the most permits ANY scheduler could grant in [startMs, t]
 * so that no closed span of `windowMs + extraMs` holds more than `limit`, for every limit at once, with demand
 * always waiting. Granting each permit as early as
 * the limits let it is optimal for every prefix (exchange argument: the k-th greedy grant is never later than
 * the k-th grant of any valid schedule), so the greedy count up to any t is exactly the upper bound.
 */
export function idealGrantTimes(
  limits: readonly { limit: number; windowMs: number }[],
  startMs: number,
  endMs: number,
  extraMs = 0,
): number[] {
  const times: number[] = [];
  for (;;) {
    let t = times.at(-1) ?? startMs;
    for (const { limit, windowMs } of limits) {
      const back = times[times.length - limit];
      if (back !== undefined) t = Math.max(t, back + windowMs + extraMs + 1);
    }
    if (t > endMs) return times;
    times.push(t);
  }
}

/** Sizes as DynamoDB counts them: attribute name bytes plus value bytes (numbers: 1 byte per 2 digits, +1). */
export function dynamoItemSize(item: Record<string, AttributeValue>): number {
  return Object.entries(item).reduce((total, [name, value]) => total + utf8(name) + valueSize(value), 0);
}

const utf8 = (text: string): number => Buffer.byteLength(text, 'utf8');
const numberSize = (n: string): number =>
  Math.ceil(
    n
      .replace(/^[-+]?0*/, '')
      .replace('.', '')
      .replace(/0+$/, '').length / 2,
  ) + 1;

function valueSize(value: AttributeValue): number {
  if (value.S !== undefined) return utf8(value.S);
  if (value.N !== undefined) return numberSize(value.N);
  if (value.NS !== undefined) return value.NS.reduce((sum, n) => sum + numberSize(n), 0);
  if (value.SS !== undefined) return value.SS.reduce((sum, text) => sum + utf8(text), 0);
  // Binary: its raw bytes (DynamoDB counts those, not their base64 on the wire).
  if (value.B !== undefined) return value.B.byteLength;
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.L !== undefined) return 3 + value.L.reduce((sum, element) => sum + 1 + valueSize(element), 0);
  if (value.M !== undefined)
    return 3 + Object.entries(value.M).reduce((sum, [k, v]) => sum + 1 + utf8(k) + valueSize(v), 0);
  throw new Error('attribute type not measured by this helper');
}

/** Reproducible simulations: the one seeded PRNG of the test support. */
export { seededRandom } from './sandbox-http.js';

/** Counts the DynamoDB requests a client sends, by command, each attempt (retries included) as it leaves. */
export function countDynamoCalls(client: DynamoDBClient): {
  calls: Record<string, number>;
  writes(): number;
  reset(): void;
} {
  const calls: Record<string, number> = {};
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const name = context.commandName ?? 'unknown';
      calls[name] = (calls[name] ?? 0) + 1;
      return next(args);
    },
    { step: 'finalizeRequest', name: 'countDynamoCalls' },
  );
  const WRITES = ['UpdateItemCommand', 'PutItemCommand', 'DeleteItemCommand', 'BatchWriteItemCommand'];
  return {
    calls,
    writes: () => WRITES.reduce((sum, name) => sum + (calls[name] ?? 0), 0),
    reset: () => {
      for (const name of Object.keys(calls)) delete calls[name];
    },
  };
}

/**
 * The ledger item of one token driven toward its largest, through the real codec and a real full write: a
 * permit asked every second of every class and of the general limits (so every slot of every ring that the
 * limits allow holds grants), the id set full, a cooldown and a cooldown claim, and a vendor cap on every limit,
 * each as long as one can be. Each minute the state is written and the stored item measured.
 * Returns the largest measured size and the plan's computed bound.
 */
export async function fillLedgerItem(options: {
  client: DynamoDBClient;
  tableName: string;
  limits: RateLimitSettings;
  hours: number;
}): Promise<{ largest: number; bound: number }> {
  const plan = planFor(options.limits);
  const clock = new ManualClock();
  const table = new LedgerTable(options.client, options.tableName, clock);
  const tokenId = 'f111111111111111';
  const scopes = [undefined, ...plan.classes.keys()];
  const reservedConsumers = new Set([...plan.reserved.values()].flatMap((w) => [...w.reserved.keys()]));
  let snapshot = await table.read(tokenId);
  let state = stateAt(snapshot.state, clock.now(), plan.marginMs);
  state.secret = newSecret();
  let largest = 0;
  const end = clock.now() + options.hours * 3600_000;
  for (let second = 0; clock.now() < end; second++) {
    await clock.advance(1000);
    const g = clock.now();
    state = stateAt(state, g, plan.marginMs);
    for (const cls of scopes) acquire(state, plan, g, 1, cls);
    // Each reserved consumer too: its reservation rings fill, then it borrows from the shared part.
    for (const consumer of reservedConsumers) acquire(state, plan, g, 1, undefined, consumer);
    while (state.spent.size < SPENT_LIMIT) state.spent.add(newReceiptId(g + 10_000 + state.spent.size));
    while (state.carriedWriteIds.length < CARRIED_WRITE_IDS) state.carriedWriteIds.push(randomWriteId());
    // As if the reservations had just changed: the item keeps when (every item may, for a span after one).
    state.reservationsChangedAt = g;
    if (second % 60 === 59) {
      // A vendor cap on every limit (one each is what the item keeps), each as long as one can be (the most
      // remaining below its limit, the furthest end), and a cooldown claim.
      const specs = [...plan.general, ...[...plan.classes.values()].flat()];
      state.caps = specs.map((spec) => ({
        scope: spec.scope,
        remaining: spec.limit - 1,
        until: g + plan.maxSpanMs,
        windowMs: spec.windowMs,
      }));
      state.cooldownClaim = {
        caller: callerTag('filler'),
        until: Math.floor((g + plan.maxSpanMs) / 1000) * 1000,
      };
      state.cooldownUntil = g + 1;
      state.version = snapshot.state.version + 1;
      state.writeIds = new Set([randomWriteId()]);
      const written = await table.writeFull(tokenId, state, plan.retainMs, plan.itemFormat, snapshot);
      if (!written.ok) throw new Error('the fill is the only writer; its write cannot conflict');
      snapshot = written.snapshot;
      // Then as many head additions as the write ids' set has room for, each to every ring's head, with its own
      // sub-slot (format 1's sets of them) and the latest offsets in the shortest slot (format 2's `T`).
      const shortestSlot = Math.min(...allRings(plan).map((spec) => spec.slotMs));
      for (let i = 1; i < WRITE_IDS_LIMIT; i++) {
        const additions = [...state.rings.keys()].map((key) => ({
          key,
          add: 0,
          max: Number.MAX_SAFE_INTEGER,
          sub: 36 - i,
        }));
        const at = snapshot.state.time + Math.max(0, shortestSlot - i);
        const added = await table.addToHeads(tokenId, additions, snapshot, randomWriteId(), at);
        if (!added?.ok) throw new Error('the fill is the only writer; its head additions cannot conflict');
        snapshot = added.snapshot;
      }
      state.writeIds = new Set(snapshot.state.writeIds);
      const { Item } = await options.client.send(
        new GetItemCommand({ TableName: options.tableName, Key: ledgerKey(tokenId) }),
      );
      largest = Math.max(largest, dynamoItemSize(Item ?? {}));
    }
  }
  return { largest, bound: plan.itemBytesBound };
}
