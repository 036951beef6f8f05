// The client's quick start (client/README.md), run as written by test/packages.test.ts against the local broker.
// In a project with @token-broker/client installed, with `npm start` running in the token-broker repository:
//
//   export TOKEN_BROKER_URL=http://127.0.0.1:8787 AWS_REGION=local
//   export AWS_ACCESS_KEY_ID=AKIALOCALPORTFOLIO01 AWS_SECRET_ACCESS_KEY=local-only-portfolio-service-secret
//   node quick-start.mjs
import { BrokerClient, VendorApiError } from '@token-broker/client';

// Region: AWS_REGION ("local" for the local broker; a Function URL names its own). Credentials: the default
// AWS chain (here the environment; in AWS the function's, task's or instance's role).
const broker = new BrokerClient({ brokerUrl: process.env.TOKEN_BROKER_URL ?? 'http://127.0.0.1:8787' });
try {
  for (const set of await broker.listCredentialSets()) {
    console.log(`credential set ${set.id} (${set.environment}): ${set.health.state}`);
  }

  // A vendor resource: the path names the token's tenant, so it is built from the token the client holds.
  const key = `quick-start-${Date.now()}`;
  const path = (token) => `/users/1/${token.tenant}/serviceKey/${key}`;
  const created = await broker.vendorRequest('uat-advisor', { method: 'POST', path, body: { name: 'Ada' } });
  console.log(`POST ${key}: ${created.status}`);
  const read = await broker.vendorRequest('uat-advisor', { method: 'GET', path });
  console.log(`GET ${key}: ${read.status} ${JSON.stringify(read.body)}`);
  console.log(`vendor quota left for this token: ${read.rateLimit.remaining} of ${read.rateLimit.limit}`);

  try {
    await broker.vendorRequest('uat-advisor', {
      method: 'GET',
      path: (token) => `/users/1/${token.tenant}/serviceKey/nobody`,
    });
  } catch (error) {
    // Final vendor answers are typed errors: the status and the vendor's code, never the token.
    if (!(error instanceof VendorApiError)) throw error;
    console.log(`GET nobody: ${error.status} ${error.code}`);
  }
} finally {
  await broker.close(); // gives unused permits back
}
