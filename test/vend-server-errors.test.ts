import { DeleteTableCommand } from '@aws-sdk/client-dynamodb';
import { describe, expect, it, vi } from 'vitest';
import { DIMENSION_ERROR_CODE, Metric } from '../shared/metric-names.js';
import { MemoryTelemetry } from '../shared/observability.js';
import { createVendHandler } from '../shared/vend/vend-handler.js';
import {
  fixture,
  getToken,
  harnessConsumers,
  parseBody,
  type VendHarness,
  withChanges,
} from './support/vend-harness.js';
import { vendHarnessPerTest } from './support/vend-suite.js';

const startHarness = vendHarnessPerTest();

/** The VendServerError points emitted, as [ErrorCode, value, every dimension name]. */
const serverErrors = (telemetry: MemoryTelemetry) =>
  telemetry.metrics
    .filter((m) => m.name === Metric.VendServerError)
    .map((m) => [m.dimensions[DIMENSION_ERROR_CODE], m.value, Object.keys(m.dimensions)]);

async function tokenId(h: VendHarness): Promise<string> {
  return parseBody<{ tokenId: string }>(await getToken(h)).tokenId;
}

/**
 * Every 5xx answer of the vend API counts once in VendServerError under its error code (the alarms and a
 * deployment's rollback watch these), over the real harness: dynalite, the sandbox vendor, the real refresher.
 */
describe('VendServerError', () => {
  it('counts a 503 LEDGER_UNAVAILABLE when the ledger table does not answer', async () => {
    const h = await startHarness();
    const id = await tokenId(h);
    await h.dynamo.client.send(new DeleteTableCommand({ TableName: h.ledgerTable }));
    const result = await h.invoke(
      withChanges(fixture('acquire-permits'), { body: { tokenId: id, count: 1 } }),
    );
    expect([result.statusCode, parseBody(result).errorCode]).toEqual([503, 'LEDGER_UNAVAILABLE']);
    expect(serverErrors(h.telemetry)).toEqual([['LEDGER_UNAVAILABLE', 1, [DIMENSION_ERROR_CODE]]]);
  });

  it('counts a 503 TOKEN_UNAVAILABLE during a vendor outage, once per answer', async () => {
    const h = await startHarness();
    h.sandbox.update({ outage: true });
    const answers = [await getToken(h), await getToken(h)];
    expect(answers.map((r) => [r.statusCode, parseBody(r).errorCode])).toEqual([
      [503, 'TOKEN_UNAVAILABLE'],
      [503, 'TOKEN_UNAVAILABLE'],
    ]);
    expect(serverErrors(h.telemetry)).toEqual([
      ['TOKEN_UNAVAILABLE', 1, [DIMENSION_ERROR_CODE]],
      ['TOKEN_UNAVAILABLE', 1, [DIMENSION_ERROR_CODE]],
    ]);
  });

  it('counts a 500 INTERNAL_ERROR when a part fails in a way nobody planned for', async () => {
    const h = await startHarness();
    // A bug, not an outage: the token store throws something that is not one of the broker's errors.
    vi.spyOn(h.store, 'read').mockRejectedValueOnce(
      new TypeError("Cannot read properties of undefined (reading 'S')"),
    );
    const result = await getToken(h);
    expect([result.statusCode, parseBody(result).errorCode]).toEqual([500, 'INTERNAL_ERROR']);
    expect(serverErrors(h.telemetry)).toEqual([['INTERNAL_ERROR', 1, [DIMENSION_ERROR_CODE]]]);
  });

  it('counts a 500 answered by the last-resort error handler outside the request pipeline', async () => {
    const h = await startHarness();
    // The per-request log line itself fails (a logger fault): middy's onError still answers a 500.
    const telemetry = new MemoryTelemetry();
    vi.spyOn(telemetry, 'info').mockImplementationOnce(() => {
      throw new RangeError('Invalid string length');
    });
    const handler = createVendHandler({
      sets: h.sets,
      consumers: harnessConsumers(h.sets),
      store: h.store,
      ledger: h.ledger,
      refresher: h.refreshInvoker,
      reports: { client: h.dynamo.client, tableName: h.ledgerTable },
      clock: h.clock,
      telemetry,
    });
    const result = await handler(fixture('list-credential-sets'), { awsRequestId: 'r-1' } as never);
    expect([result.statusCode, parseBody(result).errorCode]).toEqual([500, 'INTERNAL_ERROR']);
    expect(serverErrors(telemetry)).toEqual([['INTERNAL_ERROR', 1, [DIMENSION_ERROR_CODE]]]);
  });

  it('counts nothing for 2xx and 4xx answers: a refused caller or a bad request is not a server error', async () => {
    const h = await startHarness();
    const id = await tokenId(h);
    const answers = [
      await h.invoke(fixture('get-token')),
      await h.invoke(
        withChanges(fixture('get-token'), { callerArn: 'arn:aws:iam::999999999999:role/stranger' }),
      ),
      await h.invoke(withChanges(fixture('acquire-permits'), { body: { tokenId: id, count: 'many' } })),
      await h.invoke(withChanges(fixture('get-token'), { path: '/v1/credential-sets/nope/token' })),
      await h.invoke(withChanges(fixture('get-token'), { method: 'DELETE' })),
    ];
    expect(answers.map((r) => r.statusCode)).toEqual([200, 403, 400, 404, 405]);
    expect(serverErrors(h.telemetry)).toEqual([]);
  });
});
