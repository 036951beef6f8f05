import { afterEach, describe, expect, it } from 'vitest';
import type { BrokerClient } from '../client/broker-client.js';
import type { PermitHandle } from '../client/permit-handle.js';
import {
  type BrokerWorld,
  eventually,
  minuteRemaining,
  SET_ID,
  startBrokerWorld,
} from './support/client-world.js';
import { ENGINES } from './support/engines.js';

/**
 * The permit handle of a service that calls the vendor itself: permits it took and did not send go back
 * (`giveBack()`), also one at a time out of one batch, whose receipt the ledger honours once. The local broker
 * over real HTTP (SigV4, the vend handler, the ledger on each engine), the ledger's own count as the judge.
 */

const grants = (w: BrokerWorld) => w.callsTo('POST', '/permits').map((c) => c.body.count as number);
const returns = (w: BrokerWorld) => w.callsTo('POST', '/permits/returns').map((c) => c.body);

async function take(client: BrokerClient, tokenId: string, n: number): Promise<PermitHandle[]> {
  const permits: PermitHandle[] = [];
  for (let i = 0; i < n; i++) permits.push(await client.acquirePermit(SET_ID, tokenId));
  return permits;
}

describe.each(ENGINES)('BrokerClient permit handle: giveBack() on %s', (engine) => {
  let w: BrokerWorld;
  afterEach(async () => {
    await w.close();
  });

  it('3 permits taken and not sent, given back: the ledger counts 0 of them (before: 3, even after close())', async () => {
    w = await startBrokerWorld({ engine });
    const client = w.client();
    const token = await client.getToken(SET_ID);
    const permits = await take(client, token.tokenId, 3);
    expect(grants(w)).toEqual([1, 2]);
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(50 - 3);

    expect(permits.map((p) => p.giveBack())).toEqual([true, true, true]);
    await client.close();
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(50);
    // One give-back per grant (receipt), each with all of its permits.
    expect(returns(w).map((r) => r.count)).toEqual([1, 2]);
    expect(new Set(returns(w).map((r) => r.receipt)).size).toBe(2);
  });

  it('permits of one batch given back one at a time all come back, in one give-back of its receipt', async () => {
    w = await startBrokerWorld({ engine });
    const client = w.client();
    const token = await client.getToken(SET_ID);
    for (const permit of await take(client, token.tokenId, 3)) permit.markUsed(); // batches of 1 and 2: sent
    const batch = await take(client, token.tokenId, 4); // the batch of 4, all handed out
    expect(grants(w)).toEqual([1, 2, 4]);
    expect(new Set(batch.map((p) => p.grantedAt)).size).toBe(1);
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(50 - 7);

    for (const permit of batch) expect(permit.giveBack()).toBe(true);
    // Sent once the last of them is settled, not at close().
    await eventually(() => returns(w).length > 0);
    // Settled once: a second word changes nothing.
    expect(batch[0]?.giveBack()).toBe(false);
    await client.close();
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(50 - 3);
    expect(returns(w)).toEqual([expect.objectContaining({ tokenId: token.tokenId, count: 4 })]);
  });

  it('a permit given back while its batch is in hand serves the next caller, without a grant', async () => {
    w = await startBrokerWorld({ engine });
    const client = w.client();
    const token = await client.getToken(SET_ID);
    for (const permit of await take(client, token.tokenId, 3)) permit.markUsed();
    const [first] = await take(client, token.tokenId, 1); // of the batch of 4: 3 still in hand
    expect(first?.giveBack()).toBe(true);
    const again = await take(client, token.tokenId, 4);
    expect(grants(w)).toEqual([1, 2, 4]);
    for (const permit of again) permit.markUsed();
    await client.close();
    // Every permit of the batch was sent: nothing to give back, and the ledger counts 3 + 4.
    expect(returns(w)).toEqual([]);
    expect(minuteRemaining(await w.remaining(token.tokenId))).toBe(50 - 7);
  });

  it('a permit held and never settled: its batch goes back when the validity ends, the given-back ones with it', async () => {
    w = await startBrokerWorld({ engine });
    const client = w.client();
    const token = await client.getToken(SET_ID);
    for (const permit of await take(client, token.tokenId, 3)) permit.markUsed();
    const [held, unsent] = await take(client, token.tokenId, 2); // of the batch of 4: 2 in hand
    expect(unsent?.giveBack()).toBe(true); // back in hand: 3
    await eventually(() => w.clock.pendingSleepers > 0); // the batch's lapse timer
    // The batch lapses with one permit still held: its give-back waits for it, until the validity ends.
    await w.clock.advance(w.set.rateLimits.permitValiditySeconds * 1000);
    await eventually(() => returns(w).length === 1);
    expect(returns(w)[0]).toMatchObject({ tokenId: token.tokenId, count: 3 });
    await eventually(async () => minuteRemaining(await w.remaining(token.tokenId)) === 50 - 4);
    // Too late now: the receipt was presented.
    expect(held?.giveBack()).toBe(false);
  });
});
