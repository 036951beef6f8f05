import { BrokerClient } from '@token-broker/client';

// For a service that calls the vendor itself: the broker's token and permits, the vendor's answers reported back.
const broker = new BrokerClient({ brokerUrl: process.env.TOKEN_BROKER_URL ?? 'http://127.0.0.1:8787' });
const set = 'uat-advisor';

async function callVendor(method, key, body) {
  for (let attempt = 1; attempt <= 2; attempt++) {
    const token = await broker.getToken(set);
    const permit = await broker.acquirePermit(set, token.tokenId); // send right away: it lasts about 2 s
    const answer = await fetch(`${token.vendorBaseUrl}/users/1/${token.tenant}/serviceKey/${key}`, {
      method,
      headers: { authorization: `Bearer ${token.accessToken}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    permit.markUsed();
    // A 429 (a cooldown for every consumer of the token; this client's next permit waits for Retry-After),
    // and X-RateLimit-* headers that show less room than the broker's ledger, go to the broker.
    await broker.reportRateLimit(set, token.tokenId, answer);
    if (answer.status === 401) {
      const { errorCode, requestId } = await answer.json();
      if (errorCode !== 'TOKEN_EXPIRED' && errorCode !== 'TOKEN_INVALID')
        throw new Error(`vendor 401 ${errorCode}`);
      // The broker re-logs in if need be; getToken returns the new token from now on. Retried once.
      await broker.reportRejection(set, { tokenId: token.tokenId, errorCode, requestId });
      continue;
    }
    return answer;
  }
  throw new Error('the vendor rejected the new token too');
}

try {
  const key = `own-calls-${Date.now()}`;
  const created = await callVendor('POST', key, { name: 'Grace' });
  console.log(`POST ${key}: ${created.status}`);
  const read = await callVendor('GET', key);
  console.log(`GET ${key}: ${read.status} ${JSON.stringify(await read.json())}`);

  // A permit taken and then not needed goes back: the broker's ledger counts it no more.
  const token = await broker.getToken(set);
  const spare = await broker.acquirePermit(set, token.tokenId);
  console.log(`permit not needed, given back: ${spare.giveBack()}`);
} finally {
  await broker.close(); // gives unused permits back
}
