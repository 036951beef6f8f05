import { MAX_LEARNED_WINDOWS, MIN_LEARNED_WINDOWS } from '../learned-limits.js';
import { CALLER_TAG_LENGTH, GIVE_BACK_SLACK_MS, RECEIPT_ID_LENGTH, SPENT_LIMIT } from '../receipts.js';
import {
  CAP_UNTIL_MS,
  type ItemFormat,
  type RingSpec,
  SHARED_SCOPE,
  SUB_SLOTS,
  windowCode,
} from '../ring-plan.js';

/**
 * The item's size bound: the most bytes a ledger item of a plan's rings can take in each format, mirroring the
 * codecs (state-codec.ts, packed-codec.ts, ledger-item.ts) so that settings whose item cannot fit one write unit
 * are refused on the configuration path (limit-plan.ts compile: synth, check-config, start).
 */

/**
 * Every ledger write is charged by the larger of the item before and after it, in 1 KB units: the item is kept
 * within one unit at its worst (every ring as full as its limits allow, every id and cap slot taken).
 */
export const ITEM_BYTES_BUDGET = 1024;

/**
 * A set with reservations keeps a ring per reservation and a shared ring per reserved window beside the general
 * ones: its item may take up to 4 write units (a few reservations at the default limits take 2).
 */
export const RESERVED_ITEM_BYTES_BUDGET = 4096;

/**
 * Write ids (`w`, a string set): every write adds its own, so that after a lost answer (the SDK re-sends a write
 * that was applied, and the copy fails its condition) the ledger can tell its own applied write from someone
 * else's by reading the item. A full write replaces the set with its own id; head additions add theirs, and a
 * head addition is conditional on its id not being there yet. Head additions happen only within one slot of
 * the shortest window (a second at 60 s), so the set holds the writes of about a second, at most
 * WRITE_IDS_LIMIT: in a busier second, the next write is a full write, which resets the set. No write goes
 * without an id.
 */

/**
 * Write ids of earlier generations carried by a full write (`wp`, newest first): a full write replaces `w` with its
 * own id, so without them a write applied just before another process's full write could no longer be told
 * after a lost answer, and its grant would be decided again (counted twice). A write's id survives until this
 * many later writes have been carried past it: far longer than the SDK's retries of it take (a few hundred
 * milliseconds), at the vendor's 50 a minute. Every set carries them (`wp` in item format 1, which releases from
 * before reservations ignore; inside `rb` in format 2).
 */
export const CARRIED_WRITE_IDS = 12;
/** Write ids an item's set holds at most: past it, the next write is a full write, which resets the set (see above). */
export const WRITE_IDS_LIMIT = 12;
/** Characters of a write id: 30 random bits (unique enough among the dozen writes of a second). */
export const WRITE_ID_LENGTH = 5;

/** Characters of the `cap` text's fingerprint in `cw` (state-codec.ts). */
export const CAP_FINGERPRINT_LENGTH = 3;
const base36Digits = (n: number): number => Math.max(1, Math.ceil(Math.log(n + 1) / Math.log(36)));
/** DynamoDB's size of a number: about one byte per two significant digits, plus one. */
const numberBytes = (n: number): number => Math.ceil(String(n).length / 2) + 1;
/** Bytes of an unsigned LEB128 varint (state-codec.ts's packed format). */
export const varintBytes = (n: number): number => (n < 128 ? 1 : 1 + varintBytes(Math.floor(n / 128)));
/** The attributes every item has, at their largest: pk (`token#` + 64), v, n, t, purgeAt, cd, k. */
const FIXED_BYTES = 2 + 70 + (1 + 8) + (1 + 8) + (1 + 8) + (7 + 7) + (2 + 8) + (1 + 22);
/** Sub-slots a head's set (`s:<key>`) can hold: the full write's, and one per head addition since (w's room). */
const HEAD_SUBS = Math.min(SUB_SLOTS, 1 + WRITE_IDS_LIMIT);

/**
 * A ring covers one span and two slots, and no span holds more than the limit: so at most limit + 2 of its older
 * slots are not empty, and they hold at most twice the limit in all. `extra(threshold)` counts, for a code whose
 * size grows by one unit at each of the thresholds, the most units that many permits can add above one per slot.
 */
function ringFill(spec: RingSpec): {
  older: number;
  nonEmpty: number;
  extra: (thresholds: number[]) => number;
} {
  const older = spec.length - 1;
  const nonEmpty = Math.min(older, spec.limit + 2);
  const most = 2 * spec.limit;
  return {
    older,
    nonEmpty,
    extra: (thresholds) => thresholds.reduce((sum, t) => sum + Math.min(nonEmpty, Math.floor(most / t)), 0),
  };
}

/** The limits a vendor cap can be held for (vendor-caps.ts): general or of a class; not reservations' parts. */
const capLimits = (specs: readonly RingSpec[]): RingSpec[] =>
  specs.filter((spec) => spec.scope !== SHARED_SCOPE && !spec.scope.startsWith('@'));

/** `cdr`, the furthest cooldown claim: its caller's tag and 7 digits of Unix seconds (both formats). */
const CLAIM_BYTES = 3 + CALLER_TAG_LENGTH + 7;

/**
 * Format 1's vendor caps (vendor-caps.ts): at most one per limit; one limit's cap costs its entry in `cap`
 * (`<scope>:<remaining, below the limit>:<until, 9 digits>;`) and its window in `cw` (`<window code>,`), e.g.
 * 15 + 3 bytes for a minute general cap. Then `cap`'s and `cw`'s names and `cw`'s fingerprint, and `cdr`.
 */
function textCapBytes(specs: readonly RingSpec[]): number {
  return (
    capLimits(specs).reduce(
      (sum, spec) =>
        sum +
        (spec.scope.length + 1 + base36Digits(spec.limit) + 1 + 9 + 1) +
        (windowCode(spec.windowMs).length + 1),
      3 + 2 + CAP_FINGERPRINT_LENGTH + 1,
    ) + CLAIM_BYTES
  );
}

/** The caps as the previous release counted them: 4, or one per scope if there were more scopes. */
function previousCapBytes(specs: readonly RingSpec[], classCount: number): number {
  const longestScope = Math.max(1, ...specs.map((spec) => spec.scope.length));
  const caps = Math.max(4, classCount + 1);
  return 3 + caps * (longestScope + 1 + base36Digits(Math.max(...specs.map((s) => s.limit))) + 1 + 9 + 1);
}

/** The write ids (`w`, a string set) and, with reservations, their key and change time (`rk`, `rc`). */
const idBytes = (reservationsKeyLength: number): number =>
  1 +
  WRITE_IDS_LIMIT * WRITE_ID_LENGTH +
  (reservationsKeyLength > 0 ? 2 + reservationsKeyLength + (2 + 8) : 0);

/**
 * The most bytes a ledger item of item format 1 can take with these rings (state-codec.ts, ledger-item.ts), by
 * DynamoDB's rules (attribute names count; strings by their UTF-8 length; a number set by its numbers). Per ring,
 * the head as two attributes (its count, and the set of its grants' sub-slots) and the older slots as
 * `<sub digit><count>` separated by commas. Checked against items filled as full as they get in the tests.
 */
export function textItemBound(
  specs: readonly RingSpec[],
  classCount: number,
  reservationsKeyLength = 0,
  /** The bound as the previous release computed it: a head's sub-slots as one value, ids carried only with reservations. */
  asPreviousRelease = false,
): number {
  const headSubs = asPreviousRelease ? 1 : HEAD_SUBS;
  const carried = !asPreviousRelease || reservationsKeyLength > 0;
  let bytes =
    FIXED_BYTES +
    (1 + SPENT_LIMIT * RECEIPT_ID_LENGTH) +
    (carried ? 2 + CARRIED_WRITE_IDS * (WRITE_ID_LENGTH + 1) : 0) +
    idBytes(reservationsKeyLength);
  let rings = 1; // the attribute name `r`
  for (const spec of specs) {
    const { older, nonEmpty, extra } = ringFill(spec);
    // Each slot holding 36^d or more needs a (d+1)th digit.
    const thresholds: number[] = [];
    for (let power = 36; power <= spec.limit; power *= 36) thresholds.push(power);
    rings += spec.key.length + 1 + (older + 2 * nonEmpty + extra(thresholds)) + 1;
    // h:<key> = count, s:<key> = { sub-slots }
    bytes += 2 + spec.key.length + numberBytes(spec.limit) + 2 + spec.key.length + headSubs * numberBytes(35);
  }
  return bytes + rings + (asPreviousRelease ? previousCapBytes(specs, classCount) : textCapBytes(specs));
}

/**
 * The most bytes a ledger item of item format 2 can take (state-codec.ts, "packed"): `r` marks the format; `rb`
 * holds the rings' scopes (each name once), every ring's window, slots and older slots (one varint each: 0 empty,
 * else (count - 1) * 36 + sub + 1), the vendor caps (one per limit at most: scope, window, remaining, end after
 * the item's time), the carried write ids (4 bytes each) and the spent receipt ids (their expiry after the item's time, 3
 * random bytes); per ring `H<index>` its head count; `T` the offsets (ms) of head additions after the last full
 * write, within the shortest slot (they date the heads' latest grants for every ring at once).
 */
export function packedItemBound(
  specs: readonly RingSpec[],
  validityMs: number,
  reservationsKeyLength = 0,
): number {
  const receiptSeconds = Math.ceil((2 * validityMs + GIVE_BACK_SLACK_MS) / 1000) + 1;
  const scopes = new Set(specs.map((spec) => spec.scope));
  const maxSpanMs = Math.max(...specs.map((spec) => spec.spanMs));
  const maxLimit = Math.max(...specs.map((spec) => spec.limit));
  let packed =
    1 +
    varintBytes(scopes.size) +
    [...scopes].reduce((sum, scope) => sum + 1 + scope.length, 0) +
    varintBytes(specs.length) +
    (1 +
      capLimits(specs).reduce(
        (sum, spec) =>
          sum +
          varintBytes(scopes.size) +
          varintBytes(spec.windowMs % 1000 === 0 ? spec.windowMs / 500 : 2 * spec.windowMs + 1) +
          varintBytes(maxLimit) +
          varintBytes(Math.ceil(maxSpanMs / CAP_UNTIL_MS)),
        0,
      )) +
    (1 + CARRIED_WRITE_IDS * 4) +
    (1 + SPENT_LIMIT * (varintBytes(receiptSeconds) + 3));
  let heads = 0;
  specs.forEach((spec, index) => {
    const { older, extra } = ringFill(spec);
    const thresholds: number[] = [];
    for (let bytes = 1; bytes < 8 && 128 ** bytes <= spec.limit * 36; bytes++)
      thresholds.push(Math.ceil(128 ** bytes / 36));
    packed +=
      varintBytes(scopes.size) +
      varintBytes(spec.windowMs) +
      varintBytes(spec.slots) +
      varintBytes(older) +
      older +
      extra(thresholds);
    heads += 1 + base36Digits(index + 1) + numberBytes(spec.limit);
  });
  const offsets = 1 + WRITE_IDS_LIMIT * numberBytes(Math.min(...specs.map((spec) => spec.slotMs)) - 1);
  return (
    FIXED_BYTES + (1 + 1) + (2 + packed) + heads + offsets + idBytes(reservationsKeyLength) + CLAIM_BYTES
  );
}

/** What compile (limit-plan.ts) asks of the item: the rings of its settings, by format and learned windows. */
export interface FormatQuestion {
  /** Every ring of the plan with these classes' rings (general, classes', reservations'), in the item's order. */
  ringsIn(classes: Map<string, RingSpec[]>): RingSpec[];
  /** The classes' rings in a format; a learned class sized for `worst` windows (MIN_LEARNED_WINDOWS by default). */
  classesIn(format: ItemFormat, worst?: number): Map<string, RingSpec[]>;
  reservations: boolean;
  reservationsKeyLength: number;
  validityMs: number;
  /** `rateLimits.itemFormat`, if the settings name one. */
  asked: ItemFormat | undefined;
  /** Whether the settings have a learned class. */
  learned: boolean;
  /** Refuses the settings (a ConfigurationError naming them). */
  fail(message: string): never;
}

/**
 * The item format of a plan, the learned windows its item has room for (rule M2), the classes' rings it is sized
 * for and its bound; settings whose item cannot fit its budget are refused (`fail`), on the configuration path.
 */
export function chooseItemFormat(question: FormatQuestion): {
  itemFormat: ItemFormat;
  learnedWindows: number;
  sized: Map<string, RingSpec[]>;
  itemBytesBound: number;
} {
  const { ringsIn, classesIn, reservationsKeyLength, validityMs, fail } = question;
  const boundIn = (format: ItemFormat, classes: Map<string, RingSpec[]>) =>
    format === 2
      ? packedItemBound(ringsIn(classes), validityMs, reservationsKeyLength)
      : textItemBound(ringsIn(classes), classes.size, reservationsKeyLength);
  const budget = question.reservations ? RESERVED_ITEM_BYTES_BUDGET : ITEM_BYTES_BUDGET;
  // Settings the previous release accepted keep format 1 (which it reads), even where the bound as it is now
  // counted (every head sub-slot, carried ids) exceeds the budget: a canary or a rollback runs both releases.
  // Moving them to format 2 takes `itemFormat: 2` once no release older than this one runs (docs/deploying.md).
  const classes1 = classesIn(1);
  const acceptedBefore =
    textItemBound(ringsIn(classes1), classes1.size, reservationsKeyLength, true) <= budget;
  // Unset: format 1 where the previous release accepted the settings or the item fits it, else packed.
  // A learned class: format 2 (release N-1 refuses `[]` in its configuration, so no item of it is read there).
  const itemFormat: ItemFormat =
    question.asked ?? (!question.learned && (acceptedBefore || boundIn(1, classes1) <= budget) ? 1 : 2);
  // Sized for the most the learned classes can learn, with three windows each where that fits (M2); the rings are
  // those learned now.
  const roomy = question.learned && itemFormat === 2 ? classesIn(2, MAX_LEARNED_WINDOWS) : undefined;
  const learnedWindows = roomy && boundIn(2, roomy) <= budget ? MAX_LEARNED_WINDOWS : MIN_LEARNED_WINDOWS;
  const sized =
    itemFormat === 1 ? classes1 : learnedWindows === MAX_LEARNED_WINDOWS && roomy ? roomy : classesIn(2);
  const itemBytesBound = boundIn(itemFormat, sized);
  if (itemBytesBound > budget && !(itemFormat === 1 && acceptedBefore)) {
    const packed = itemFormat === 1 ? boundIn(2, classesIn(2)) : 0;
    const hint =
      itemFormat === 1 && packed <= budget
        ? `; item format 2 would take ${packed} (rateLimits.itemFormat: 2, or leave it unset: docs/deploying.md)`
        : '';
    fail(
      question.reservations
        ? `these limits and reservations could make the ledger item ${itemBytesBound} bytes, over ${budget}${hint}: use fewer reservations, classes or windows`
        : `these limits could make the ledger item ${itemBytesBound} bytes, over one write unit (${ITEM_BYTES_BUDGET})${hint}: use fewer classes or windows`,
    );
  }
  return { itemFormat, learnedWindows, sized, itemBytesBound };
}
