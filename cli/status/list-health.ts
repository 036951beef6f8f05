import { z } from 'zod';
import { brokerError, shapeProblem, unexpected } from '../../client/broker-responses.js';
import { BrokerUnreachableError } from '../../client/errors.js';
import { FunctionUrlSigner } from '../../client/sigv4.js';
import type { BrokerTarget } from '../broker-target.js';
import type { CliIo } from '../io.js';

const windowUsage = z
  .object({
    limit: z.number(),
    windowSeconds: z.number(),
    remaining: z.number(),
    /** Permits granted in the window (plus the ledger's margin); absent from brokers before it was added. */
    used: z.number().optional(),
    class: z.string().optional(),
  })
  .loose();

/** One set of `GET /v1/credential-sets`. The operator fields are optional: older brokers do not send them. */
const setHealth = z
  .object({
    id: z.string(),
    environment: z.string(),
    companyRole: z.string(),
    health: z
      .object({
        state: z.string(),
        expiresAt: z.number().nullable(),
        refreshedAt: z.string().nullable().optional(),
        lastError: z
          .object({ code: z.string(), at: z.string(), requestId: z.string().optional() })
          .nullable(),
        consecutiveFailures: z.number().optional(),
        nextAttemptAt: z.string().nullable().optional(),
        rateLimitedUntil: z.string().nullable().optional(),
      })
      .loose(),
    quota: z.array(windowUsage).nullable().optional(),
  })
  .loose();
export type SetHealthView = z.infer<typeof setHealth>;

const listAnswer = z.object({ credentialSets: z.array(setHealth) }).loose();

const TIMEOUT_MS = 15_000;

/**
 * `GET /v1/credential-sets`, signed with SigV4 like every consumer call. The consumer library's summary keeps only
 * what services need; the operator view needs the whole health object, so this one call is made here.
 */
export async function listHealth(target: BrokerTarget, io: CliIo): Promise<SetHealthView[]> {
  const signer = new FunctionUrlSigner({ region: target.region, credentials: target.credentials });
  const signed = await signer.sign(
    {
      url: `${target.url}/v1/credential-sets`,
      method: 'GET',
      headers: { accept: 'application/json', 'user-agent': 'token-broker-cli' },
    },
    new Date(io.clock.now()),
  );
  let response: Response;
  let text: string;
  try {
    response = await io.fetch(signed.url, {
      method: signed.method,
      headers: signed.headers,
      redirect: 'manual',
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    text = await response.text();
  } catch (error) {
    throw new BrokerUnreachableError(
      `broker unreachable: GET /v1/credential-sets (${(error as Error)?.name === 'TimeoutError' ? `no answer within ${TIMEOUT_MS} ms` : 'connection failed'})`,
      { cause: error },
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  if (!response.ok) throw brokerError(response.status, response.headers, json, io.clock.now());
  if (json === undefined) throw unexpected(response.status, 'the answer is not JSON');
  const parsed = listAnswer.safeParse(json);
  if (!parsed.success) throw unexpected(response.status, shapeProblem(parsed.error));
  return parsed.data.credentialSets;
}
