import {
  type AttributeValue,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDynamoDbClient } from '../shared/aws/dynamodb.js';
import type { FailureState, StoredToken, TakeLeaseRequest } from '../shared/tokens/index.js';
import { DynamoTokenStore, TokenStoreUnavailableError, tokenIdOf } from '../shared/tokens/index.js';
import type { LocalDynamo } from './support/dynalite.js';
import { ENGINES, startEngine } from './support/engines.js';
import { createFaultyDynamoDbClient } from './support/faulty-dynamodb.js';
import { TOKEN_STORE_WRITES } from './support/refresher-harness.js';

const T0 = Date.UTC(2026, 0, 5, 9, 0, 0);
const MIN = 60_000;

let dynamo: LocalDynamo;
let table: string;
let store: DynamoTokenStore;
let setSeq = 0;
let setId: string;

beforeEach(() => {
  setId = `store-set-${++setSeq}`;
});

function token(accessToken: string, exp: number, floorSeconds = 300): StoredToken {
  return {
    tokenId: tokenIdOf(accessToken),
    accessToken,
    exp,
    issuedAt: exp - 14_400,
    env: 'uat',
    obtainedAt: (exp - 14_400) * 1000,
    usableUntil: (exp - floorSeconds) * 1000,
    tenant: 't',
    companyKey: 'ck',
    executionPlatformKey: 'ep',
    userKey: 'uk',
    username: 'uat-advisor',
    roles: ['ADVISOR'],
    groups: [1],
    defaultCompanyInventorySource: 'MARKET',
  };
}

const take = (now: number, overrides: Partial<TakeLeaseRequest> = {}) =>
  store.takeLease({
    credentialSetId: setId,
    holder: 'holder-a',
    leaseId: `lease-${now}-${Math.random()}`,
    now,
    leaseExpiresAt: now + MIN,
    lastAttemptNoLaterThan: now - MIN,
    expectedTokenId: null,
    ...overrides,
  });

/** Takes the lease and promotes `t`: the usual way a token gets into the table. */
async function promote(now: number, t: StoredToken, expectedTokenId: string | null = null) {
  const leaseId = `lease-promote-${now}`;
  const taken = await take(now, { leaseId, expectedTokenId });
  expect(taken.taken).toBe(true);
  const previous = taken.taken ? taken.state.current : undefined;
  const { usable: _u, ...stored } = previous ?? { usable: false };
  return store.promote({
    credentialSetId: setId,
    leaseId,
    now,
    token: t,
    ...(previous ? { previous: stored as StoredToken } : {}),
  });
}

describe.each(ENGINES)('DynamoTokenStore on %s', (engine) => {
  beforeAll(async () => {
    dynamo = await startEngine(engine);
    table = await dynamo.createTable('tokens');
    store = new DynamoTokenStore({ client: dynamo.client, tableName: table });
  });
  afterAll(() => dynamo.close());

  it('knows nothing of a set never written', async () => {
    expect(await store.read(setId, T0)).toBeUndefined();
  });

  it('lets one of 20 concurrent takers hold the lease, and nobody else until it expires and the interval passed', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => take(T0, { holder: `holder-${i}`, leaseId: `lease-${i}` })),
    );
    expect(results.filter((r) => r.taken)).toHaveLength(1);
    const state = await store.read(setId, T0);
    expect(state?.lease?.expiresAt).toBe(T0 + MIN);
    expect(state?.lastAttemptAt).toBe(T0);
    // The lease holds until it expires, and the storm guard a minute after the attempt.
    expect((await take(T0 + MIN - 1, { lastAttemptNoLaterThan: T0 - 1 })).taken).toBe(false);
    expect((await take(T0 + MIN, { lastAttemptNoLaterThan: T0 - 1 })).taken).toBe(false);
    expect((await take(T0 + MIN, { lastAttemptNoLaterThan: T0 })).taken).toBe(true);
  });

  it('promotes a token for the lease holder only, keeps the previous one, and clears lease and failure', async () => {
    const a = token('token-a', T0 / 1000 + 14_400);
    expect(await promote(T0, a)).toBe(true);
    const later = T0 + 3 * 3600_000;
    const b = token('token-b', later / 1000 + 14_400);
    // A holder whose lease was taken over writes nothing.
    const taken = await take(later, { leaseId: 'lease-b', expectedTokenId: a.tokenId });
    expect(taken.taken).toBe(true);
    expect(
      await store.promote({ credentialSetId: setId, leaseId: 'someone-else', now: later, token: b }),
    ).toBe(false);
    expect((await store.read(setId, later))?.current?.tokenId).toBe(a.tokenId);
    expect(
      await store.promote({ credentialSetId: setId, leaseId: 'lease-b', now: later, token: b, previous: a }),
    ).toBe(true);
    const state = await store.read(setId, later);
    expect(state?.current).toEqual({ ...b, usable: true });
    expect(state?.previous).toEqual({ ...a, usable: true });
    expect(state?.lease).toBeUndefined();
    expect(state?.failure).toBeUndefined();
  });

  it('checks expiry on every read: unusable below the floor, gone from exp on', async () => {
    const exp = T0 / 1000 + 14_400;
    await promote(T0, token('token-a', exp));
    expect((await store.read(setId, (exp - 301) * 1000))?.current?.usable).toBe(true);
    expect((await store.read(setId, (exp - 300) * 1000))?.current?.usable).toBe(true);
    expect((await store.read(setId, (exp - 300) * 1000 + 1))?.current?.usable).toBe(false);
    expect((await store.read(setId, exp * 1000 - 1))?.current?.usable).toBe(false);
    expect((await store.read(setId, exp * 1000))?.current).toBeUndefined();
  });

  it('keeps the previous token until its own exp', async () => {
    const a = token('token-a', T0 / 1000 + 3600);
    await promote(T0, a);
    const b = token('token-b', T0 / 1000 + 14_400);
    await promote(T0 + 2 * MIN, b, a.tokenId);
    expect((await store.read(setId, T0 + 2 * MIN))?.previous?.tokenId).toBe(a.tokenId);
    const state = await store.read(setId, (a.exp + 1) * 1000);
    expect(state?.previous).toBeUndefined();
    expect(state?.current?.tokenId).toBe(b.tokenId);
  });

  it('refuses a take when the current token is no longer the one the taker saw', async () => {
    const a = token('token-a', T0 / 1000 + 14_400);
    await promote(T0, a);
    const later = T0 + 10 * MIN;
    expect((await take(later, { expectedTokenId: null })).taken).toBe(false);
    expect((await take(later, { expectedTokenId: tokenIdOf('token-x') })).taken).toBe(false);
    expect((await take(later, { expectedTokenId: a.tokenId })).taken).toBe(true);
  });

  it('treats an expired current token like none when taking', async () => {
    const a = token('token-a', T0 / 1000 + 3600);
    await promote(T0, a);
    expect((await take(T0 + 3600_000, { expectedTokenId: null })).taken).toBe(true);
  });

  it('judges expiry on the vendor clock the token was measured with, and lets a re-login replace it', async () => {
    const exp = T0 / 1000 + 14_400;
    // The vendor's clock ran 400 s ahead at login: it calls the token expired at exp - 400 by ours.
    const ahead = {
      ...token('token-a', exp),
      vendorClockSkewSeconds: 400,
      usableUntil: (exp - 300 - 400) * 1000,
    };
    await promote(T0, ahead);
    expect((await store.read(setId, (exp - 701) * 1000))?.current?.usable).toBe(true);
    expect((await store.read(setId, (exp - 699) * 1000))?.current?.usable).toBe(false);
    const gone = await store.read(setId, (exp - 400) * 1000);
    expect(gone?.current).toBeUndefined();
    expect(gone?.expiredCurrentTokenId).toBe(ahead.tokenId);
    // Not yet expired on our clock: only a taker naming the expired token may replace it.
    const at = (exp - 300) * 1000;
    expect((await take(at, { expectedTokenId: null })).taken).toBe(false);
    expect((await take(at, { expectedTokenId: null, expiredTokenId: tokenIdOf('token-x') })).taken).toBe(
      false,
    );
    expect((await take(at, { expectedTokenId: null, expiredTokenId: ahead.tokenId })).taken).toBe(true);
  });

  it('answers the item version alone, which grows with every write', async () => {
    expect(await store.readVersion(setId)).toBeUndefined();
    const a = token('token-a', T0 / 1000 + 14_400);
    await promote(T0, a);
    const version = await store.readVersion(setId);
    expect(version).toBe((await store.read(setId, T0))?.version);
    await take(T0 + 10 * MIN, { expectedTokenId: a.tokenId });
    expect(await store.readVersion(setId)).toBe((version ?? 0) + 1);
  });

  it('records a failure beside the token, and honours its cooldown and the secret-version exception', async () => {
    const a = token('token-a', T0 / 1000 + 14_400);
    await promote(T0, a);
    const at = T0 + 10 * MIN;
    const failure: FailureState = {
      errorCode: 'INVALID_CREDENTIALS',
      requestId: 'req-1',
      kind: 'REJECTED',
      at,
      consecutive: 1,
      cooldownUntil: at + 15 * MIN,
      secretVersion: 'v1',
    };
    const taken = await take(at, { leaseId: 'lease-f', expectedTokenId: a.tokenId });
    expect(taken.taken).toBe(true);
    expect(await store.recordFailure({ credentialSetId: setId, leaseId: 'wrong', now: at, failure })).toBe(
      false,
    );
    expect(await store.recordFailure({ credentialSetId: setId, leaseId: 'lease-f', now: at, failure })).toBe(
      true,
    );
    const state = await store.read(setId, at);
    expect(state?.failure).toEqual(failure);
    expect(state?.current?.tokenId).toBe(a.tokenId);
    expect(state?.lease).toBeUndefined();

    const during = at + 5 * MIN;
    const base = { expectedTokenId: a.tokenId };
    expect((await take(during, base)).taken).toBe(false);
    expect((await take(during, { ...base, secretVersion: 'v1' })).taken).toBe(false);
    expect((await take(during, { ...base, secretVersion: 'v2' })).taken).toBe(true);
  });

  it('does not waive a vendor-failure backoff for a new secret version', async () => {
    await take(T0, { leaseId: 'lease-t' });
    const failure: FailureState = {
      errorCode: 'SERVICE_UNAVAILABLE',
      kind: 'TRANSIENT',
      at: T0,
      consecutive: 3,
      cooldownUntil: T0 + 4 * MIN,
      secretVersion: 'v1',
    };
    await store.recordFailure({ credentialSetId: setId, leaseId: 'lease-t', now: T0, failure });
    expect((await take(T0 + 2 * MIN, { secretVersion: 'v2' })).taken).toBe(false);
    expect((await take(T0 + 4 * MIN)).taken).toBe(true);
  });

  it('keys the item by set id, never by token, and gives it a TTL', async () => {
    const a = token('token-a', T0 / 1000 + 14_400);
    await promote(T0, a);
    const { Item } = await dynamo.client.send(
      new GetItemCommand({ TableName: table, Key: { pk: { S: `set#${setId}` } } }),
    );
    expect(Item?.pk?.S).toBe(`set#${setId}`);
    expect(Number(Item?.purgeAt?.N)).toBeGreaterThan(a.exp);
    expect(Item?.version?.N).toBe('2');
    expect(Item?.current?.M?.tokenId?.S).toBe(a.tokenId);
  });

  it('treats an item past its TTL as absent (TTL deletes lazily)', async () => {
    await promote(T0, token('token-a', T0 / 1000 + 14_400));
    expect(await store.read(setId, T0 + 3 * 24 * 3600_000)).toBeUndefined();
  });

  it('answers a take whose answer was lost as taken, from the item returned with the failed condition or read', async () => {
    const faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
    const through = new DynamoTokenStore({ client: faulty.client, tableName: table });
    faulty.faults.aim(TOKEN_STORE_WRITES.lease, 'lostAnswer');
    const taken = await through.takeLease(takeInput(T0));
    expect(taken).toMatchObject({ taken: true, state: { lease: { leaseId: 'l', expiresAt: T0 + MIN } } });
    expect(faulty.faults.stats.byCommand.UpdateItem).toMatchObject({ sent: 2, lostAnswer: 1 });
    // DynamoDB Local returns the item with the failed condition (ALL_OLD); dynalite does not: one read more.
    expect(faulty.faults.stats.byCommand.GetItem?.sent ?? 0).toBe(engine === 'dynalite' ? 1 : 0);
    expect((await store.read(setId, T0))?.version).toBe(1);
    // Someone else's lease is still someone else's, after a lost answer as without one.
    expect((await take(T0 + MIN, { leaseId: 'other' })).taken).toBe(true);
    faulty.faults.aim(TOKEN_STORE_WRITES.lease, 'lostAnswer');
    expect(await through.takeLease({ ...takeInput(T0 + MIN), leaseId: 'l2' })).toEqual({ taken: false });
    faulty.client.destroy();
  });

  it('answers a promote and a failure write whose answers were lost, even when the SDK gave up after them', async () => {
    const faulty = createFaultyDynamoDbClient({ endpoint: dynamo.endpoint });
    const through = new DynamoTokenStore({ client: faulty.client, tableName: table });
    const holderWrite = TOKEN_STORE_WRITES.holder;
    const a = token('token-a', T0 / 1000 + 14_400);
    expect((await take(T0, { leaseId: 'lease-a' })).taken).toBe(true);
    faulty.faults.aim(holderWrite, 'lostAnswer', 'throttle', 'throttle');
    expect(await through.promote({ credentialSetId: setId, leaseId: 'lease-a', now: T0, token: a })).toBe(
      true,
    );
    expect((await store.read(setId, T0))?.current?.tokenId).toBe(a.tokenId);

    const at = T0 + 10 * MIN;
    const failure: FailureState = {
      errorCode: 'SERVICE_UNAVAILABLE',
      kind: 'TRANSIENT',
      at,
      consecutive: 1,
      cooldownUntil: at + MIN,
    };
    expect((await take(at, { leaseId: 'lease-f', expectedTokenId: a.tokenId })).taken).toBe(true);
    faulty.faults.aim(holderWrite, 'lostAnswer');
    expect(
      await through.recordFailure({ credentialSetId: setId, leaseId: 'lease-f', now: at, failure }),
    ).toBe(true);
    expect(await store.read(setId, at)).toMatchObject({ failure, current: { tokenId: a.tokenId } });
    expect(faulty.faults.stats.lostAnswer).toBe(2);
    // A write that failed for good unapplied is still the table's failure, not an answer.
    faulty.faults.aim(holderWrite, 'serverError', 'serverError', 'serverError');
    expect((await take(at + 2 * MIN, { leaseId: 'lease-g', expectedTokenId: a.tokenId })).taken).toBe(true);
    await expect(
      through.recordFailure({ credentialSetId: setId, leaseId: 'lease-g', now: at, failure }),
    ).rejects.toBeInstanceOf(TokenStoreUnavailableError);
    faulty.client.destroy();
  });

  it('leaves beside the attributes release N-1 reads only one it ignores, which its writes leave harmlessly stale', async () => {
    const a = token('token-a', T0 / 1000 + 14_400);
    expect((await take(T0, { leaseId: 'lease-a' })).taken).toBe(true);
    expect(await store.promote({ credentialSetId: setId, leaseId: 'lease-a', now: T0, token: a })).toBe(true);
    const key = { pk: { S: `set#${setId}` } };
    const item = async () =>
      (await dynamo.client.send(new GetItemCommand({ TableName: table, Key: key, ConsistentRead: true })))
        .Item;
    expect(Object.keys((await item()) ?? {}).sort()).toEqual(
      ['pk', 'credentialSetId', 'current', 'lastAttemptAt', 'purgeAt', 'releasedLeaseId', 'version'].sort(),
    );
    expect((await item())?.releasedLeaseId?.S).toBe('lease-a');
    // A holder whose lease another took over: release N-1's promote of the taker (its own attributes only,
    // releasedLeaseId untouched) and the lost holder's promote, told it lost although an older id is there.
    const later = T0 + 3 * 3600_000;
    expect((await take(later, { leaseId: 'lease-b', expectedTokenId: a.tokenId })).taken).toBe(true);
    const takenOver = later + 2 * MIN;
    expect(
      (
        await take(takenOver, {
          leaseId: 'lease-c',
          expectedTokenId: a.tokenId,
          lastAttemptNoLaterThan: later,
        })
      ).taken,
    ).toBe(true);
    const c = token('token-c', takenOver / 1000 + 14_400);
    await dynamo.client.send(
      new UpdateItemCommand({
        TableName: table,
        Key: key,
        UpdateExpression: 'SET #current = :token REMOVE #lease, #failure ADD #version :one',
        ConditionExpression: '#lease.#leaseId = :leaseId',
        ExpressionAttributeNames: {
          '#current': 'current',
          '#lease': 'lease',
          '#failure': 'failure',
          '#version': 'version',
          '#leaseId': 'leaseId',
        },
        ExpressionAttributeValues: {
          ':token': { M: marshallToken(c) },
          ':one': { N: '1' },
          ':leaseId': { S: 'lease-c' },
        },
      }),
    );
    expect((await item())?.releasedLeaseId?.S).toBe('lease-a');
    const b = token('token-b', later / 1000 + 14_400);
    expect(
      await store.promote({ credentialSetId: setId, leaseId: 'lease-b', now: takenOver, token: b }),
    ).toBe(false);
    expect((await store.read(setId, takenOver))?.current?.tokenId).toBe(c.tokenId);
  });

  it('translates table failures into TokenStoreUnavailableError, and names the wrong fields of a bad item', async () => {
    const missing = new DynamoTokenStore({ client: dynamo.client, tableName: 'no-such-table' });
    await expect(missing.read(setId, T0)).rejects.toMatchObject({
      code: 'TOKEN_STORE_UNAVAILABLE',
      message: expect.stringContaining('ResourceNotFoundException'),
    });
    await dynamo.client.send(
      new PutItemCommand({
        TableName: table,
        Item: {
          pk: { S: `set#${setId}` },
          credentialSetId: { S: setId },
          current: { M: { accessToken: { S: 'secret-token-value' } } },
        },
      }),
    );
    const error = await store.read(setId, T0).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TokenStoreUnavailableError);
    expect(String((error as Error).message)).toContain('current.tokenId');
    expect(JSON.stringify(error) + String(error)).not.toContain('secret-token-value');
  });

  it('fails closed on an unreachable table endpoint', async () => {
    const client = createDynamoDbClient({ endpoint: 'http://127.0.0.1:9' });
    const unreachable = new DynamoTokenStore({ client, tableName: table });
    await expect(unreachable.read(setId, T0)).rejects.toBeInstanceOf(TokenStoreUnavailableError);
    await expect(take(T0).then(() => unreachable.takeLease({ ...takeInput(T0) }))).rejects.toBeInstanceOf(
      TokenStoreUnavailableError,
    );
    client.destroy();
  });
});

const marshallToken = (t: StoredToken) => marshall(t) as Record<string, AttributeValue>;

const takeInput = (now: number): TakeLeaseRequest => ({
  credentialSetId: setId,
  holder: 'h',
  leaseId: 'l',
  now,
  leaseExpiresAt: now + MIN,
  lastAttemptNoLaterThan: now - MIN,
  expectedTokenId: null,
});
