import { readFileSync, writeFileSync } from 'node:fs';
import { type AttributeValue, type DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import { ManualClock } from '../shared/clock.js';
import { rateLimitSettingsSchema } from '../shared/config/credential-sets.js';
import { RegionalRateLedger } from '../shared/ledger/index.js';
import { decodePacked } from '../shared/ledger/item/index.js';
import { GENERAL_SCOPE, ringKey } from '../shared/ledger/limit-plan.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient } from './support/faulty-dynamodb.js';

/**
 * The worked examples of docs/ledger.md, made by the code: each runs one operation of the real ledger on DynamoDB
 * (both engines) and prints the ledger item before and after, its random parts (the receipt secret, write ids,
 * receipt ids) named in order of appearance. The docs' block must be what this prints; `UPDATE_LEDGER_DOC=1 npx
 * vitest run test/ledger-worked-examples.test.ts` rewrites it after a format change (then read the diff).
 */
const DOC = 'docs/ledger.md';
const START = '<!-- worked examples: test/ledger-worked-examples.test.ts -->';
const END = '<!-- end of worked examples -->';
const TOKEN = 'tok-example';
const SET = 'uat-example';
const T0 = Date.UTC(2026, 10, 30, 9, 0, 0);
const LIMITS = rateLimitSettingsSchema.parse({ classes: { reports: [] } });

/** The item as `name = value` lines, its random parts replaced by stable names. */
class Printer {
  readonly #names = new Map<string, string>();
  #name(id: string, kind: string): string {
    let name = this.#names.get(id);
    if (!name) {
      name = `<${kind}${[...this.#names.values()].filter((n) => n.startsWith(`<${kind}`)).length + 1}>`;
      this.#names.set(id, name);
    }
    return name;
  }
  #value(attribute: string, value: AttributeValue): string {
    if (attribute === 'k') return '<receipt secret>';
    if (value.SS) {
      const kind = attribute === 'g' ? 'receipt ' : 'write ';
      return `{${value.SS.map((id) => this.#name(id, kind))
        .sort()
        .join(', ')}}`;
    }
    if (attribute === 'wp' && value.S !== undefined)
      return value.S.split(',')
        .map((id) => this.#name(id, 'write '))
        .join(',');
    if (value.S !== undefined) return JSON.stringify(value.S);
    if (value.N !== undefined) return value.N;
    return JSON.stringify(value);
  }
  /** Format 2's `rb` (packed-codec.ts), decoded: each ring's older slots (newest first), caps, ids. */
  #packed(bytes: Uint8Array, time: number): string[] {
    const packed = decodePacked(bytes, time, (what) => {
      throw new Error(`rb: ${what}`);
    });
    const rings = [...packed.rings].map(([key, ring], index) => {
      const slots = ring.counts.slice(1).map((count) => (count ? String(count) : '.'));
      return `  ring ${index} ${key}: older slots [${slots.join(' ')}] (head: H${index.toString(36)})`;
    });
    const caps = packed.caps.map(
      (cap) =>
        `  cap ${cap.scope}: ${cap.remaining} left until t+${cap.until - time} ms` +
        (cap.windowMs ? ` (the ${cap.windowMs / 1000} s limit)` : ''),
    );
    const ids = [
      ...(packed.carriedWriteIds.length
        ? [`  carried write ids: ${packed.carriedWriteIds.map((id) => this.#name(id, 'write ')).join(', ')}`]
        : []),
      ...(packed.spent.length
        ? [`  spent receipts: ${packed.spent.map((id) => this.#name(id, 'receipt ')).join(', ')}`]
        : []),
    ];
    return ['rb = (packed)', ...rings, ...caps, ...ids];
  }
  print(item: Record<string, AttributeValue> | undefined): string[] {
    if (!item) return ['(no item)'];
    const time = Number(item.t?.N ?? 0);
    return Object.keys(item)
      .sort()
      .flatMap((attribute) => {
        const value = item[attribute] as AttributeValue;
        if (attribute === 'rb' && value.B) return this.#packed(value.B, time);
        if (value.NS) return [`${attribute} = {${value.NS.join(', ')}}`];
        if (attribute === 't' || attribute === 'cd') return [`${attribute} = ${clockOf(Number(value.N))}`];
        if (attribute === 'purgeAt') return [`${attribute} = ${clockOf(Number(value.N) * 1000)} (TTL)`];
        return [`${attribute} = ${this.#value(attribute, value)}`];
      });
  }
}

/** A time of day as the examples show it (they all run on 2026-11-30, from 09:00:00 UTC). */
const clockOf = (ms: number): string =>
  `${new Date(ms).toISOString().slice(0, 10) === '2026-11-30' ? '' : `${new Date(ms).toISOString().slice(0, 10)} `}${new Date(ms).toISOString().slice(11, 23)} (${ms})`;

interface Example {
  title: string;
  steps: string[];
}

describe.each(ENGINES)('the worked examples of docs/ledger.md on %s', (engine) => {
  let dynamo: LocalDynamo;
  let client: DynamoDBClient;
  const examples: Example[] = [];

  beforeAll(async () => {
    dynamo = await startEngine(engine);
    client = createDynamoDbClient({ endpoint: dynamo.endpoint });
  });
  afterAll(async () => {
    client?.destroy();
    await dynamo?.close();
  });

  async function world(name: string, options: { regional?: boolean; client?: DynamoDBClient } = {}) {
    const table = await dynamo.createTable(name);
    const clock = new ManualClock(T0);
    const ledger = new RegionalRateLedger({
      client: options.client ?? client,
      tableName: table,
      clock,
      random: () => 0,
      ...(options.regional ? { regional: true } : {}),
    });
    const printer = new Printer();
    const read = async (pk: string) =>
      (
        await client.send(
          new GetItemCommand({ TableName: table, Key: { pk: { S: pk } }, ConsistentRead: true }),
        )
      ).Item;
    const item = async () => printer.print(await read(`token#${TOKEN}`));
    return { table, clock, ledger, printer, read, item };
  }

  function example(title: string, steps: string[]): void {
    examples.push({ title, steps });
  }

  it('a grant: a full write, then a head addition in the same slot', async () => {
    const w = await world('example-grant');
    const before = await w.item();
    const first = await w.ledger.acquire({ tokenId: TOKEN, caller: 'svc-a', count: 3, limits: LIMITS });
    expect(first.granted).toBe(true);
    const afterFirst = await w.item();
    await w.clock.advance(200);
    const second = await w.ledger.acquire({ tokenId: TOKEN, caller: 'svc-b', count: 2, limits: LIMITS });
    expect(second.granted).toBe(true);
    const afterSecond = await w.item();
    expect(afterSecond.find((line) => line.startsWith('v ='))).toBe('v = 1');
    example('A grant', [
      'Before (no item for the token):',
      ...before,
      'After `acquire` of 3 (svc-a): a full write creates the item',
      ...afterFirst,
      'After `acquire` of 2 (svc-b) 200 ms later: a head addition (ADD to the head counts, `n` + 1, its write id added)',
      ...afterSecond,
    ]);
  });

  it('a give-back: the receipt spent, the count taken off the slot it was granted in', async () => {
    const w = await world('example-give-back');
    const grant = await w.ledger.acquire({ tokenId: TOKEN, caller: 'svc-a', count: 5, limits: LIMITS });
    if (!grant.granted) throw new Error('not granted');
    await w.clock.advance(1500);
    const before = await w.item();
    const back = await w.ledger.giveBack({
      tokenId: TOKEN,
      caller: 'svc-a',
      receipt: grant.receipt,
      count: 4,
      limits: LIMITS,
    });
    expect(back.returned).toBe(4);
    const after = await w.item();
    example('A give-back', [
      'Before (5 granted to svc-a at 09:00:00.000, 1.5 s ago):',
      ...before,
      "After `giveBack` of 4 on that receipt: a full write (`v` 2) at the new ledger time; the receipt spent (in `rb`), 1 of the 5 still counted, in the minute ring's older slot and the hour ring's head; the write id of the grant carried",
      ...after,
    ]);
  });

  it('a lost answer: the write applied, its answer lost; the re-send finds its write id and grants once', async () => {
    const faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
    const w = await world('example-lost-answer', { client: faulty.client });
    await w.ledger.acquire({ tokenId: TOKEN, caller: 'svc-a', count: 3, limits: LIMITS });
    await w.clock.advance(100);
    const before = await w.item();
    faulty.faults.aim((attempt) => attempt.command === 'UpdateItem', 'lostAnswer');
    const grant = await w.ledger.acquire({ tokenId: TOKEN, caller: 'svc-b', count: 2, limits: LIMITS });
    expect(grant.granted).toBe(true);
    expect(faulty.faults.stats.lostAnswer).toBe(1);
    const after = await w.item();
    expect(after.find((line) => line.startsWith('n ='))).toBe('n = 1');
    faulty.client.destroy();
    example('A lost answer', [
      'Before (3 granted):',
      ...before,
      "After `acquire` of 2 whose head addition DynamoDB applied but whose answer was lost: the SDK re-sends it, its condition fails (the item has moved), the ledger reads the item, finds the write's id in `w` and answers the grant it made: counted once",
      ...after,
    ]);
  });

  it('a learned limit: a vendor answer names the class limit, the class ring is kept to it', async () => {
    const w = await world('example-learned');
    const grant = await w.ledger.acquire({
      tokenId: TOKEN,
      caller: 'svc-a',
      count: 1,
      class: 'reports',
      setId: SET,
      limits: LIMITS,
    });
    expect(grant.granted).toBe(true);
    await w.clock.advance(1000);
    const before = await w.item();
    const learned = await w.ledger.reportVendorFeedback({
      tokenId: TOKEN,
      caller: 'svc-a',
      class: 'reports',
      setId: SET,
      limits: LIMITS,
      limit: 10,
      remaining: 6,
      reset: Math.floor(w.clock.now() / 1000) + 59,
    });
    expect(learned?.learned?.limits.map((l) => [l.limit, l.windowSeconds])).toEqual([[10, 60]]);
    const after = await w.item();
    const learnedItem = w.printer.print(await w.read(`learned#${SET}`));
    example('A learned limit', [
      "Before (1 `reports` permit granted: the class's limits are learned and none is known yet, so it is probed one at a time):",
      ...before,
      "After a report of the vendor's answer to one of them (`limit` 10, `remaining` 6, reset in 59 s): the set's learned item",
      ...learnedItem,
      'and the token item, its class ring now planned for 10 a minute and a cap of what the vendor said remains',
      ...after,
    ]);
  });

  it("a share adoption: a Region's share of each budget, stamped with its fence", async () => {
    const w = await world('example-share', { regional: true });
    const before = await w.item();
    const minute = ringKey(GENERAL_SCOPE, 60_000);
    const hour = ringKey(GENERAL_SCOPE, 3_600_000);
    await w.ledger.adoptShare(TOKEN, LIMITS, undefined, {
      limits: { [minute]: 30, [hour]: 600 },
      fenceAt: T0 + 30_000,
    });
    const after = await w.item();
    const grant = await w.ledger.acquire({ tokenId: TOKEN, caller: 'svc-a', count: 31, limits: LIMITS });
    expect(grant.granted).toBe(false);
    example('A share adoption', [
      'Before (a regional ledger, no item yet: it grants nothing until its lease renewer adopts a share):',
      ...before,
      'After `adoptShare` of 30 a minute and 600 an hour until the fence 30 s on: `rs` holds it; an ask of 31 is denied',
      ...after,
    ]);
  });

  it('the docs show what the code writes', () => {
    const block = examples
      .map(({ title, steps }) => `#### ${title}\n\n\`\`\`text\n${steps.join('\n')}\n\`\`\``)
      .join('\n\n');
    const doc = readFileSync(DOC, 'utf8');
    const start = doc.indexOf(START);
    const end = doc.indexOf(END);
    if (start < 0 || end < start) throw new Error(`${DOC}: no block between "${START}" and "${END}"`);
    const updated = `${doc.slice(0, start + START.length)}\n\n${block}\n\n${doc.slice(end)}`;
    if (process.env.UPDATE_LEDGER_DOC === '1' && engine === 'dynalite') writeFileSync(DOC, updated);
    else expect(doc).toBe(updated);
  });
});
