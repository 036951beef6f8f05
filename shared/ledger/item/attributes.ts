/**
 * The attribute names by their role (`ATTR.version` is `'v'`): an enum, so that the bundler inlines each name where
 * it is used (the table below is for documentation and tests, and stays out of the functions' bundles).
 */
export enum ATTR {
  /** shared/aws/tables.ts PARTITION_KEY (test/item-attributes.test.ts checks they agree). */
  key = 'pk',
  version = 'v',
  fastWrites = 'n',
  time = 't',
  /** shared/aws/tables.ts TTL_ATTRIBUTE. */
  purgeAt = 'purgeAt',
  rings = 'r',
  packedRings = 'rb',
  head = 'h:',
  headSubs = 's:',
  packedHead = 'H',
  headOffsets = 'T',
  cooldown = 'cd',
  caps = 'cap',
  capWindows = 'cw',
  cooldownClaim = 'cdr',
  secret = 'k',
  spent = 'g',
  writeIds = 'w',
  carriedWriteIds = 'wp',
  reservationsKey = 'rk',
  reservationsChangedAt = 'rc',
  learnedVersion = 'lv',
  share = 'rs',
  shareVersion = 'rsv',
  asked = 'dq',
}

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
  key: { name: ATTR.key, type: 'S', introduced: '04cac04', writtenBy: ['create'], readByPrevious: true },
  version: {
    name: ATTR.version,
    type: 'N',
    introduced: '86f10ca',
    writtenBy: ['full write'],
    readByPrevious: true,
  },
  fastWrites: {
    name: ATTR.fastWrites,
    type: 'N',
    introduced: '86f10ca',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: true,
  },
  time: {
    name: ATTR.time,
    type: 'N',
    introduced: '86f10ca',
    writtenBy: ['full write'],
    readByPrevious: true,
  },
  purgeAt: {
    name: ATTR.purgeAt,
    type: 'N',
    introduced: '86f10ca',
    writtenBy: ['full write'],
    readByPrevious: true,
  },
  rings: {
    name: ATTR.rings,
    type: 'S',
    introduced: '86f10ca',
    writtenBy: ['full write'],
    readByPrevious: true,
  },
  packedRings: {
    name: ATTR.packedRings,
    type: 'B',
    introduced: '77b5585',
    writtenBy: ['full write'],
    readByPrevious: false,
  },
  head: {
    name: ATTR.head,
    type: 'N',
    introduced: '86f10ca',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: true,
  },
  headSubs: {
    name: ATTR.headSubs,
    type: 'NS',
    introduced: '86f10ca',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: true,
  },
  packedHead: {
    name: ATTR.packedHead,
    type: 'N',
    introduced: '77b5585',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: false,
  },
  headOffsets: {
    name: ATTR.headOffsets,
    type: 'NS',
    introduced: '77b5585',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: false,
  },
  cooldown: {
    name: ATTR.cooldown,
    type: 'N',
    introduced: '86f10ca',
    writtenBy: ['vendor report and cap'],
    readByPrevious: true,
  },
  caps: {
    name: ATTR.caps,
    type: 'S',
    introduced: '86f10ca',
    writtenBy: ['vendor report and cap'],
    readByPrevious: true,
  },
  capWindows: {
    name: ATTR.capWindows,
    type: 'S',
    introduced: '03b7d9e',
    writtenBy: ['vendor report and cap'],
    readByPrevious: false,
  },
  cooldownClaim: {
    name: ATTR.cooldownClaim,
    type: 'S',
    introduced: '03b7d9e',
    writtenBy: ['vendor report and cap'],
    readByPrevious: false,
  },
  secret: {
    name: ATTR.secret,
    type: 'S',
    introduced: '641da81',
    writtenBy: ['create'],
    readByPrevious: true,
  },
  spent: {
    name: ATTR.spent,
    type: 'SS',
    introduced: '641da81',
    writtenBy: ['give-back'],
    readByPrevious: true,
  },
  writeIds: {
    name: ATTR.writeIds,
    type: 'SS',
    introduced: '04249ee',
    writtenBy: ['full write', 'grant (head addition)'],
    readByPrevious: true,
  },
  carriedWriteIds: {
    name: ATTR.carriedWriteIds,
    type: 'S',
    introduced: 'b040523',
    writtenBy: ['full write'],
    readByPrevious: true,
  },
  reservationsKey: {
    name: ATTR.reservationsKey,
    type: 'S',
    introduced: '6ce3880',
    writtenBy: ['grant (reservations changed)'],
    readByPrevious: true,
  },
  reservationsChangedAt: {
    name: ATTR.reservationsChangedAt,
    type: 'N',
    introduced: '6ce3880',
    writtenBy: ['grant (reservations changed)'],
    readByPrevious: true,
  },
  learnedVersion: {
    name: ATTR.learnedVersion,
    type: 'N',
    introduced: 'a2c133d',
    writtenBy: ['grant', 'learning (vendor report)'],
    readByPrevious: false,
  },
  share: {
    name: ATTR.share,
    type: 'S',
    introduced: '21fbf11',
    writtenBy: ['share adoption'],
    readByPrevious: false,
  },
  shareVersion: {
    name: ATTR.shareVersion,
    type: 'S',
    introduced: '72d3219',
    writtenBy: ['share adoption'],
    readByPrevious: false,
  },
  asked: {
    name: ATTR.asked,
    type: 'N',
    introduced: 'fbe2dcf',
    writtenBy: ['denied-ask count'],
    readByPrevious: false,
  },
} as const;
