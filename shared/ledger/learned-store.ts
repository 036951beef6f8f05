import { type DynamoDBClient, GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { learnedKey } from '../aws/keys.js';
import { lostToAnotherWriter } from '../aws/lost-write.js';
import type { Clock } from '../clock.js';
import { LedgerUnavailableError } from './errors.js';
import type { LearnedClasses, LearnedLimit } from './learned-limits.js';
import type { RiseState, Rises } from './learned-rise.js';

/**
 * Learned class limits per credential set, kept across restarts and token changes: one item per set,
 * `learned#<setId>` (no token's `token#...`, report counter's `report#...`, token item's `set#...` nor lease's
 * `lease#...`), with a version every write increments (conditional on the version read: two processes learning at
 * once never lose one another's) and the classes' limits as JSON (`c`): each with when it was learned and the tag
 * of the caller who taught it, and the rises under way (`rs`, learned-rise.ts). No TTL. Release N-1 reads `c` (a
 * limit's fields it does not know are ignored) and not `rs` nor `sd`, which a write of it drops: a rise's evidence
 * then starts again, and a seed is not there for a Region's first learned ring (a gap of one window, as before it).
 *
 * `sd` (seeds): per learned class, per window a report taught, what the vendor had counted (`limit - remaining`) and
 * the ledger time of the report, and the version of the write that put it there: the ledger of a Region that did
 * not take the report seeds its new ring from it (ledger-state.ts seedFromLearned; docs/multi-region.md).
 *
 * Where: the ledger table in a one-Region stage; in a two-Region stage the MRSC table (LEARNED_TABLE_NAME), so that
 * both Regions hold and lease one learned view (docs/multi-region.md, "Learned limits"). There a write that meets
 * the other Region's write to the item in flight is refused unapplied with ReplicatedWriteConflictException: the
 * other Region wrote first, as a failed condition says, and it is answered as one (read again, decide again), never
 * as an outage.
 */
export interface LearnedView {
  /** 0: nothing learned yet. */
  version: number;
  classes: LearnedClasses;
  rises: Rises;
  /** What reports counted, for the rings of the windows they taught (`sd`; none: {}). */
  seeds?: Seeds;
  /** Clock time it was read. */
  at: number;
}

/** How long a process plans on a learned view it read before reading it again (docs/class-limits.md). */
export const LEARNED_CACHE_MS = 5000;
const MAX_CONFLICTS = 10;
const LIMIT_FIELDS = ['limit', 'windowSeconds', 'learnedAt'] as const;

/**
 * The environment variable naming the table of the learned items, set in a two-Region stage only (the MRSC table);
 * unset, a ledger keeps them in its own table.
 */
export const LEARNED_TABLE_ENV = 'LEARNED_TABLE_NAME';

/**
 * A report's count for a window it taught (compact: it is kept on the item): `w` the window in seconds, `n` what
 * the vendor had counted in it, `at` the ledger time of the report, `v` the version of the write that put it there,
 * `k` the tag of the report's ledger key (learned-rings.ts seedKeyOf: the vendor counted that token's requests).
 */
export interface LearnedSeed {
  w: number;
  n: number;
  at: number;
  v: number;
  k?: string;
}

/** By class: at most one seed per window. */
export type Seeds = Record<string, LearnedSeed[]>;

/** What a change of the learned item works on. */
export interface Learned {
  classes: LearnedClasses;
  rises: Rises;
  seeds?: Seeds;
}

/** The stored seeds, checked: anything malformed is read as no seed (the ring starts as it did without). */
function parseSeeds(text: string | undefined): Seeds {
  if (text === undefined) return {};
  try {
    const parsed = JSON.parse(text) as Record<string, LearnedSeed[]>;
    const out: Seeds = {};
    for (const [name, seeds] of Object.entries(parsed))
      if (Array.isArray(seeds))
        out[name] = seeds.filter(
          (s) =>
            [s?.w, s?.n, s?.at, s?.v].every((x) => Number.isFinite(x) && x >= 0) &&
            (s.k === undefined || typeof s.k === 'string'),
        );
    return out;
  } catch {
    return {};
  }
}

/** The stored rises, checked: anything malformed is read as no rise (no trial: the kept limits hold). */
function parseRises(text: string | undefined): Rises {
  if (text === undefined) return {};
  try {
    const parsed = JSON.parse(text) as Record<string, RiseState[]>;
    const out: Rises = {};
    for (const [name, rises] of Object.entries(parsed)) {
      if (!Array.isArray(rises)) continue;
      out[name] = rises.filter(
        (r) =>
          Number.isFinite(r?.limit) &&
          Number.isFinite(r?.windowSeconds) &&
          Array.isArray(r.seen) &&
          r.seen.every((s) => typeof s?.by === 'string' && Number.isFinite(s.at) && Number.isFinite(s.to)) &&
          (r.trialSince === undefined || Number.isFinite(r.trialSince)) &&
          (r.fullSince === undefined || Number.isFinite(r.fullSince)) &&
          (r.blockedUntil === undefined || Number.isFinite(r.blockedUntil)),
      );
    }
    return out;
  } catch {
    return {};
  }
}

/** The stored JSON, checked: a malformed item is read as nothing learned (the probe is the safe side). */
function parseClasses(text: string | undefined): LearnedClasses {
  if (text === undefined) return {};
  try {
    const parsed = JSON.parse(text) as Record<string, LearnedLimit[]>;
    const out: LearnedClasses = {};
    for (const [name, limits] of Object.entries(parsed)) {
      if (!Array.isArray(limits)) continue;
      out[name] = limits.filter(
        (l) =>
          LIMIT_FIELDS.every((f) => Number.isFinite(l?.[f]) && l[f] > 0) &&
          typeof l.by === 'string' &&
          (l.until === undefined || Number.isFinite(l.until)) &&
          (l.raisedFrom === undefined || Number.isFinite(l.raisedFrom)),
      );
    }
    return out;
  } catch {
    return {};
  }
}

export class LearnedStore {
  readonly #client: DynamoDBClient;
  readonly #tableName: string;
  readonly #clock: Clock;
  readonly #cacheMs: number;
  readonly #cache = new Map<string, LearnedView>();

  /** `cacheMs`: how long a read view is used before reading again (default 5 s). */
  constructor(options: { client: DynamoDBClient; tableName: string; clock: Clock; cacheMs?: number }) {
    this.#client = options.client;
    this.#tableName = options.tableName;
    this.#clock = options.clock;
    this.#cacheMs = options.cacheMs ?? LEARNED_CACHE_MS;
  }

  /** The set's view: cached for a short while, or read fresh (`fresh`: always). */
  async view(setId: string, fresh = false): Promise<LearnedView> {
    const cached = this.#cache.get(setId);
    if (!fresh && cached && this.#clock.now() - cached.at <= this.#cacheMs) return cached;
    return this.#read(setId);
  }

  /**
   * Changes what the set learned: `change` gets the classes, rises and seeds as read (and the version it would
   * write) and returns them changed, or undefined for no change. Conditional on the version read; on a conflict,
   * again on a fresh read. Returns the view after.
   */
  async update(
    setId: string,
    change: (learned: Learned, version: number) => Learned | undefined,
  ): Promise<{ view: LearnedView; changed: boolean }> {
    for (let conflicts = 0; conflicts <= MAX_CONFLICTS; conflicts++) {
      const read = await this.#read(setId);
      const version = read.version + 1;
      const got = change(
        structuredClone({ classes: read.classes, rises: read.rises, seeds: read.seeds ?? {} }),
        version,
      );
      if (got === undefined) return { view: read, changed: false };
      const next = { ...got, seeds: got.seeds ?? read.seeds ?? {} };
      try {
        await this.#send(() =>
          this.#client.send(
            new PutItemCommand({
              TableName: this.#tableName,
              Item: {
                ...learnedKey(setId),
                v: { N: String(version) },
                c: { S: JSON.stringify(next.classes) },
                ...(Object.keys(next.rises).length > 0 ? { rs: { S: JSON.stringify(next.rises) } } : {}),
                ...(Object.keys(next.seeds).length > 0 ? { sd: { S: JSON.stringify(next.seeds) } } : {}),
              },
              ConditionExpression: read.version === 0 ? 'attribute_not_exists(#v)' : '#v = :v',
              ExpressionAttributeNames: { '#v': 'v' },
              ...(read.version === 0
                ? {}
                : { ExpressionAttributeValues: { ':v': { N: String(read.version) } } }),
            }),
          ),
        );
      } catch (error) {
        // Someone wrote first (or MRSC refused ours while the other Region's was in flight: not applied). Our own
        // re-sent write may have applied too (a lost answer): the next read tells, by the content.
        if (lostToAnotherWriter(error)) continue;
        throw error;
      }
      const view: LearnedView = { version, ...next, at: this.#clock.now() };
      this.#cache.set(setId, view);
      return { view, changed: true };
    }
    throw new LedgerUnavailableError(`learned limits busy: ${MAX_CONFLICTS} conflicting writes in a row`);
  }

  async #read(setId: string): Promise<LearnedView> {
    const { Item } = await this.#send(() =>
      this.#client.send(
        new GetItemCommand({ TableName: this.#tableName, Key: learnedKey(setId), ConsistentRead: true }),
      ),
    );
    const version = Item?.v?.N === undefined ? 0 : Number(Item.v.N);
    const view: LearnedView = {
      version: Number.isSafeInteger(version) && version > 0 ? version : 0,
      classes: parseClasses(Item?.c?.S),
      rises: parseRises(Item?.rs?.S),
      seeds: parseSeeds(Item?.sd?.S),
      at: this.#clock.now(),
    };
    this.#cache.set(setId, view);
    return view;
  }

  async #send<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (lostToAnotherWriter(error) || error instanceof LedgerUnavailableError) throw error;
      throw new LedgerUnavailableError('learned limits did not answer', { cause: error });
    }
  }
}
