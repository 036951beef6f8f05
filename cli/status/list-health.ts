import {
  brokerError,
  type ListedSet,
  listAnswer,
  shapeProblem,
  unexpected,
} from '../../client/broker-responses.js';
import { BrokerUnreachableError } from '../../client/errors.js';
import { FunctionUrlSigner } from '../../client/sigv4.js';
import type { BrokerTarget } from '../broker-target.js';
import type { CliIo } from '../io.js';

/** One set of `GET /v1/credential-sets`, the operator fields included where the broker sends them. */
export type SetHealthView = ListedSet;

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
