import { PARTITION_KEY, TTL_ATTRIBUTE } from '../../aws/tables.js';

/**
 * Every attribute of a ledger item, in one table (issue 34): its DynamoDB name (a prefix, for the per-ring head
 * attributes), its DynamoDB type, the commit that introduced it (the first in shared/ledger to read it), which
 * operations write it, and whether release N-1 (test/previous-release.json, 668d70e) reads it. The codecs
 * (ledger-item.ts, ledger-table.ts) take the names from here; docs/ledger.md quotes the table.
 *
 * "full write" is every operation whose write is not a head addition (item/write-loop.ts): it writes the whole
 * state, so it writes (or removes) every attribute it carries. An attribute N-1 does not read, N-1 also does not
 * keep: its full write drops it (each attribute's comment in ledger-item.ts says what that costs).
 */
export const ITEM_ATTRIBUTES = {
  key: { name: PARTITION_KEY, type: 'S', introduced: '04cac04', writtenBy: ['create'], readByPrevious: true },
  version: { name: 'v', type: 'N', introduced: '86f10ca', writtenBy: ['full write'], readByPrevious: true },
  fastWrites: {
    name: 'n',
    type: 'N',
    introduced: '86f10ca',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: true,
  },
  time: { name: 't', type: 'N', introduced: '86f10ca', writtenBy: ['full write'], readByPrevious: true },
  purgeAt: {
    name: TTL_ATTRIBUTE,
    type: 'N',
    introduced: '86f10ca',
    writtenBy: ['full write'],
    readByPrevious: true,
  },
  rings: { name: 'r', type: 'S', introduced: '86f10ca', writtenBy: ['full write'], readByPrevious: true },
  packedRings: {
    name: 'rb',
    type: 'B',
    introduced: '77b5585',
    writtenBy: ['full write'],
    readByPrevious: false,
  },
  head: {
    name: 'h:',
    type: 'N',
    introduced: '86f10ca',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: true,
  },
  headSubs: {
    name: 's:',
    type: 'NS',
    introduced: '86f10ca',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: true,
  },
  packedHead: {
    name: 'H',
    type: 'N',
    introduced: '77b5585',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: false,
  },
  headOffsets: {
    name: 'T',
    type: 'NS',
    introduced: '77b5585',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: false,
  },
  cooldown: {
    name: 'cd',
    type: 'N',
    introduced: '86f10ca',
    writtenBy: ['vendor report and cap'],
    readByPrevious: true,
  },
  caps: {
    name: 'cap',
    type: 'S',
    introduced: '86f10ca',
    writtenBy: ['vendor report and cap'],
    readByPrevious: true,
  },
  capWindows: {
    name: 'cw',
    type: 'S',
    introduced: '03b7d9e',
    writtenBy: ['vendor report and cap'],
    readByPrevious: false,
  },
  cooldownClaim: {
    name: 'cdr',
    type: 'S',
    introduced: '03b7d9e',
    writtenBy: ['vendor report and cap'],
    readByPrevious: false,
  },
  secret: { name: 'k', type: 'S', introduced: '641da81', writtenBy: ['create'], readByPrevious: true },
  spent: { name: 'g', type: 'SS', introduced: '641da81', writtenBy: ['give-back'], readByPrevious: true },
  writeIds: {
    name: 'w',
    type: 'SS',
    introduced: '04249ee',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: true,
  },
  carriedWriteIds: {
    name: 'wp',
    type: 'S',
    introduced: 'b040523',
    writtenBy: ['full write'],
    readByPrevious: true,
  },
  reservationsKey: {
    name: 'rk',
    type: 'S',
    introduced: '6ce3880',
    writtenBy: ['grant (reservations changed)'],
    readByPrevious: true,
  },
  reservationsChangedAt: {
    name: 'rc',
    type: 'N',
    introduced: '6ce3880',
    writtenBy: ['grant (reservations changed)'],
    readByPrevious: true,
  },
  learnedVersion: {
    name: 'lv',
    type: 'N',
    introduced: 'a2c133d',
    writtenBy: ['grant', 'learning (vendor report)'],
    readByPrevious: false,
  },
  share: {
    name: 'rs',
    type: 'S',
    introduced: '21fbf11',
    writtenBy: ['share adoption'],
    readByPrevious: false,
  },
  shareVersion: {
    name: 'rsv',
    type: 'S',
    introduced: '72d3219',
    writtenBy: ['share adoption'],
    readByPrevious: false,
  },
  asked: {
    name: 'dq',
    type: 'N',
    introduced: 'fbe2dcf',
    writtenBy: ['denied-ask count'],
    readByPrevious: false,
  },
} as const;

/** The attribute names by their role: `ATTR.version` is `'v'`. */
export const ATTR = Object.fromEntries(
  Object.entries(ITEM_ATTRIBUTES).map(([role, attribute]) => [role, attribute.name]),
) as { readonly [Role in keyof typeof ITEM_ATTRIBUTES]: (typeof ITEM_ATTRIBUTES)[Role]['name'] };
