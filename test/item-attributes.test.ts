import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PARTITION_KEY, TTL_ATTRIBUTE } from '../shared/aws/tables.js';
import { ATTR, ITEM_ATTRIBUTES } from '../shared/ledger/item/index.js';
import { extractPreviousRelease } from './support/previous-release.js';

describe('ledger item attributes (shared/ledger/item/attributes.ts)', () => {
  it('I4: the table names each attribute once, with the key and TTL names of shared/aws/tables.ts', () => {
    const names = Object.values(ITEM_ATTRIBUTES).map((attribute) => attribute.name);
    expect(new Set(names).size).toBe(names.length);
    expect(ATTR.key).toBe(PARTITION_KEY);
    expect(ATTR.purgeAt).toBe(TTL_ATTRIBUTE);
    for (const [role, attribute] of Object.entries(ITEM_ATTRIBUTES))
      expect(attribute.name).toBe(ATTR[role as keyof typeof ATTR]);
  });

  it('I4: the attributes the table says release N-1 reads are those its item codec reads', () => {
    const source = readFileSync(
      path.join(extractPreviousRelease().dir, 'shared/ledger/ledger-item.ts'),
      'utf8',
    );
    const reads = (name: string) =>
      name === PARTITION_KEY ||
      name === TTL_ATTRIBUTE ||
      source.includes(`item.${name}?`) ||
      source.includes(`item.${name} `) ||
      source.includes(`number('${name}')`) ||
      source.includes(`= '${name}'`);
    for (const attribute of Object.values(ITEM_ATTRIBUTES))
      expect({ name: attribute.name, reads: reads(attribute.name) }).toEqual({
        name: attribute.name,
        reads: attribute.readByPrevious,
      });
  });
});

describe('docs/ledger.md quotes the attribute table', () => {
  const START =
    '<!-- attributes: shared/ledger/item/attributes.ts, checked by test/item-attributes.test.ts -->';
  const END = '<!-- end of attributes -->';
  const table = () =>
    [
      '| Attribute | Type | Introduced in | Written by | Release N-1 reads it |',
      '|---|---|---|---|---|',
      ...Object.entries(ITEM_ATTRIBUTES).map(
        ([role, a]) =>
          `| \`${a.name}\`${a.name.endsWith(':') || a.name === 'H' ? '…' : ''} (${role}) | ${a.type} | ${a.introduced} | ${a.writtenBy.join(', ')} | ${a.readByPrevious ? 'yes' : 'no'} |`,
      ),
    ].join('\n');

  it('the table in docs/ledger.md is the one in attributes.ts', () => {
    const doc = readFileSync('docs/ledger.md', 'utf8');
    const start = doc.indexOf(START);
    const end = doc.indexOf(END);
    expect(start).toBeGreaterThanOrEqual(0);
    expect(end).toBeGreaterThan(start);
    expect(doc.slice(start + START.length, end).trim()).toBe(table());
  });
});
