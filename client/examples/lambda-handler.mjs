// A Lambda function (Node.js runtime) that uses the broker: client/README.md ("In a Lambda function") explains it,
// and test/packages.test.ts imports this file from the packed client and invokes it as Lambda does, twice.
// Environment: TOKEN_BROKER_URL (the stage's VendUrl); Lambda sets AWS_REGION and the role's credentials.
import { BrokerClient, VendorApiError } from '@token-broker/client';

// Module scope: one client per execution environment, built at its cold start and used by every invocation it
// serves, so the cached token and the permit batch carry over from one invocation to the next. No close() in the
// handler: it would give the permits back, drop the token and refuse every later call (ClientClosedError).
const broker = new BrokerClient({ brokerUrl: process.env.TOKEN_BROKER_URL ?? 'http://127.0.0.1:8787' });

// event: { key, name? }: with a name, creates the vendor resource `key`; without, reads it.
export async function handler(event, context) {
  const path = (token) => `/users/1/${token.tenant}/serviceKey/${event.key}`;
  try {
    const answer = event.name
      ? await broker.vendorRequest('uat-advisor', { method: 'POST', path, body: { name: event.name } })
      : await broker.vendorRequest('uat-advisor', { method: 'GET', path });
    return { statusCode: answer.status, body: answer.body, requestId: context.awsRequestId };
  } catch (error) {
    // The vendor's final answer (404, 409, …) is the caller's; anything else fails the invocation.
    if (!(error instanceof VendorApiError)) throw error;
    return { statusCode: error.status, errorCode: error.code, requestId: context.awsRequestId };
  }
}
