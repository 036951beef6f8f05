import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { Clock } from '../clock.js';
import { ClockReference } from '../ledger/ledger-clock.js';

/**
 * Feeds DynamoDB's clock into a ClockReference: every answer of this client (errors too: a failed condition is
 * an answer) gives our clock when its attempt left and came back, and its `Date` header. At the deserialize
 * step, with a high priority: inside the SDK's retries (each attempt is a sample of its own), after the answer
 * is parsed (an error carries it as `$response`). An answer with an `Age` header came from a cache, not from
 * DynamoDB at that moment: ignored, as the SDK's own clock correction ignores it.
 * `clock` must be the clock the ledger of this client runs on.
 */
export function attachDateReference(
  client: DynamoDBClient,
  clock: Clock,
  reference: ClockReference = new ClockReference(),
): ClockReference {
  const sample = (response: unknown, sentAt: number) => {
    const headers = (response as { headers?: Record<string, string | undefined> } | undefined)?.headers;
    if (!headers || headers.age !== undefined || headers.Age !== undefined) return;
    const date = headers.date ?? headers.Date;
    if (date === undefined) return;
    const second = Date.parse(date);
    if (!Number.isNaN(second)) reference.record(sentAt, clock.now(), second);
  };
  client.middlewareStack.add(
    (next) => async (args) => {
      const sentAt = clock.now();
      try {
        const result = await next(args);
        sample(result.response, sentAt);
        return result;
      } catch (error) {
        sample((error as { $response?: unknown } | undefined)?.$response, sentAt);
        throw error;
      }
    },
    { step: 'deserialize', priority: 'high', name: 'dynamoDbDateReference' },
  );
  return reference;
}
