// A service's unit tests with the client's test double, FakeBrokerClient (`@token-broker/client/testing`): no
// broker, no vendor, no test-runner dependency (node:test). test/packages.test.ts runs this very file from the
// packed client: `node --test testing.test.mjs`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BrokerApiError, PermitDeadlineError, VendorRateLimitError } from '@token-broker/client';
import { FakeBrokerClient } from '@token-broker/client/testing';

// The service's code under test (in a service, its own module): it takes the broker as a parameter, so that
// production passes a BrokerClient and the tests a FakeBrokerClient.
async function customerName(broker, key) {
  const path = (token) => `/users/1/${token.tenant}/serviceKey/${key}`;
  try {
    const { body } = await broker.vendorRequest('uat-advisor', { method: 'GET', path });
    return body.name;
  } catch (error) {
    if (error.code === 'RESOURCE_NOT_FOUND' && error.status === 404) return undefined;
    throw error;
  }
}

test('reads the name the vendor answers, with one permit', async () => {
  const broker = new FakeBrokerClient({ vendor: () => ({ status: 200, body: { name: 'Ada' } }) });
  assert.equal(await customerName(broker, 'c1'), 'Ada');
  assert.deepEqual(broker.calls[0].request, {
    method: 'GET',
    path: '/users/1/uat-advisor-tenant/serviceKey/c1',
  });
  assert.deepEqual(broker.permits, { granted: 1, used: 1, givenBack: 0 });
});

test('an unknown customer (the vendor answers 404) is undefined', async () => {
  const broker = new FakeBrokerClient({
    vendor: () => ({ status: 404, body: { errorCode: 'RESOURCE_NOT_FOUND', message: 'not found' } }),
  });
  assert.equal(await customerName(broker, 'nobody'), undefined);
});

test('a vendor 429 that outlasted the client retries reaches the caller', async () => {
  const broker = new FakeBrokerClient({
    vendor: () => ({ status: 429, body: { message: 'slow down' }, headers: { 'Retry-After': '30' } }),
  });
  const error = await customerName(broker, 'c1').catch((e) => e);
  assert.ok(error instanceof VendorRateLimitError);
  assert.equal(error.retryAfterSeconds, 30);
});

test('no permit within the wait (the broker kept answering 429): PermitDeadlineError', async () => {
  const broker = new FakeBrokerClient().denyPermits('uat-advisor', { retryAfterSeconds: 5 });
  const error = await customerName(broker, 'c1').catch((e) => e);
  assert.ok(error instanceof PermitDeadlineError);
  assert.equal(error.retryAfterSeconds, 5);
});

test('the broker refuses: 403 for a set the role may not use, 503 while no token can be had', async () => {
  const broker = new FakeBrokerClient({ vendor: () => ({ status: 200, body: { name: 'Ada' } }) })
    .refuse('uat-advisor', 403)
    .refuse('uat-advisor', 503, { retryAfterSeconds: 2 });
  const forbidden = await customerName(broker, 'c1').catch((e) => e);
  assert.ok(forbidden instanceof BrokerApiError);
  assert.equal(`${forbidden.status} ${forbidden.code}`, '403 INSUFFICIENT_PERMISSIONS');
  const unavailable = await customerName(broker, 'c1').catch((e) => e);
  assert.equal(`${unavailable.status} ${unavailable.code}`, '503 TOKEN_UNAVAILABLE');
  assert.equal(unavailable.retryAfterSeconds, 2);
  // The broker says why (the set's cause, the same for every caller): a wrong password reads INVALID_CREDENTIALS.
  assert.equal(unavailable.details.cause.code, 'REFRESH_IN_PROGRESS');
  // Each refusal was scripted once: the third call goes through.
  assert.equal(await customerName(broker, 'c1'), 'Ada');
});

test('a set the broker does not have is 404 RESOURCE_NOT_FOUND, and close() ends the client', async () => {
  const broker = new FakeBrokerClient();
  const error = await broker.getToken('no-such-set').catch((e) => e);
  assert.equal(`${error.status} ${error.code}`, '404 RESOURCE_NOT_FOUND');
  await broker.close();
  await assert.rejects(broker.getToken('uat-advisor'), { name: 'ClientClosedError' });
});
