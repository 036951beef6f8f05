import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import * as z from 'zod';
import { ConfigurationError } from '../errors.js';
import { lazySchema } from '../lazy-schema.js';
import { type ConsumerConfig, parseConsumers, requireReservedConsumers } from './consumers.js';
import { type CredentialSetConfig, parseCredentialSets } from './credential-sets.js';
import { type OperatorConfig, parseOperators } from './operators.js';
import { unknownKeysError } from './unknown-keys.js';

/**
 * The functions' configuration registry: one JSON document per function, written at synth from the stage
 * (functionConfigDocuments in infra/stage-config.ts) into the function's own code asset, beside the bundle, and read once at cold start.
 *
 * Why a file in the code asset, and not the environment, SSM, AppConfig or a DynamoDB item:
 * - Size: Lambda's environment holds 4 KB in all (about 20 consumers); an SSM parameter 4 KB (8 KB advanced);
 *   a code asset holds megabytes. 500 consumers and 100 sets are about 150 KB.
 * - Cold start: a local file read and JSON.parse, no network call, nothing that can be throttled or down when
 *   an instance starts (SSM, AppConfig and DynamoDB would each add a call, its retries and an IAM grant).
 * - Deploy safety: the document is part of the code asset, so a change of consumers or sets publishes a new
 *   vend version and goes through the canary and its rollback alarms like a code change; a rollback restores
 *   code and configuration together. SSM, AppConfig or a DynamoDB item change under a running version, outside
 *   CodeDeploy (AppConfig has its own gradual deployment, but a second one, not tied to the code's version).
 * - Who may change it: whoever may merge to the repository's main branch, reviewed, through the pipeline; no
 *   runtime write permission exists for anyone. The price: a consumer is added or removed by a deploy (minutes),
 *   not by an API call. Revoking a consumer in a hurry is done on its side (its IAM permission to invoke the
 *   URL), see docs/deploying.md.
 *
 * Its revision is the hash of the file's bytes (`configRevision`): the stack sets it as `BROKER_CONFIG_REVISION`
 * and the cold start checks the file against it and logs it, so the console, `cdk diff` and the logs all say
 * which configuration a version runs, and a file changed after synth (by hand, cut short) fails the cold start.
 * Hashing the bytes as read costs a fraction of a millisecond for 500 consumers; re-serialising to compare would
 * cost several.
 */
export const BROKER_CONFIG_FILE = 'broker-config.json';
export const BROKER_CONFIG_FORMAT = 1;

const documentSchema = lazySchema(() =>
  z.strictObject({
    format: z.literal(BROKER_CONFIG_FORMAT),
    stage: z.string().min(1),
    credentialSets: z.array(z.unknown()),
    consumers: z.array(z.unknown()).optional(),
    operators: z.array(z.unknown()).optional(),
  }),
);

export interface BrokerConfigContent {
  stage: string;
  credentialSets: unknown[];
  consumers?: unknown[];
  operators?: unknown[];
}

export type BrokerConfigDocument = z.infer<typeof documentSchema>;

/** The document for `content`. */
export function brokerConfigDocument(content: BrokerConfigContent): BrokerConfigDocument {
  return {
    format: BROKER_CONFIG_FORMAT,
    stage: content.stage,
    credentialSets: content.credentialSets,
    ...(content.consumers ? { consumers: content.consumers } : {}),
    ...(content.operators ? { operators: content.operators } : {}),
  };
}

/** The document as the file holds it: the bytes its revision is the hash of. */
export const brokerConfigText = (document: BrokerConfigDocument): string => JSON.stringify(document);

/** The revision of a document's file: the first 16 hex digits of the SHA-256 of its bytes. */
export const configRevision = (text: string | Buffer): string =>
  createHash('sha256').update(text).digest('hex').slice(0, 16);

/** A document as read at cold start, with the name errors give it. */
export interface LoadedBrokerConfig {
  document: BrokerConfigDocument;
  /** The hash of the file as read (configRevision). */
  revision: string;
  /** `broker-config.json` (or the file BROKER_CONFIG_FILE names): the prefix of every error about its fields. */
  source: string;
  /**
   * The stack vouches for it: the file is byte for byte the revision the stack deployed (BROKER_CONFIG_REVISION),
   * i.e. the document the synth wrote after checking that these functions' own parsers read it as written
   * (`verifyBrokerConfig`). Its fields are then used as they are; any other document is validated field by field.
   */
  vouched: boolean;
}

/**
 * Reads the function's configuration document: BROKER_CONFIG_FILE if set (a path, relative to the working
 * directory), else `broker-config.json` beside the code (LAMBDA_TASK_ROOT on Lambda). When the stack gave a
 * BROKER_CONFIG_REVISION, the file must be that revision, byte for byte. A missing, unreadable or wrong file fails the cold
 * start with a message naming it.
 */
export function readBrokerConfig(env: Record<string, string | undefined>): LoadedBrokerConfig {
  const file = env.BROKER_CONFIG_FILE?.trim()
    ? path.resolve(env.BROKER_CONFIG_FILE.trim())
    : path.join(env.LAMBDA_TASK_ROOT?.trim() || process.cwd(), BROKER_CONFIG_FILE);
  const source = path.basename(file);
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new ConfigurationError(
      `invalid configuration: the configuration document ${file} cannot be read (${code})`,
      { cause },
    );
  }
  const revision = configRevision(bytes);
  const expected = env.BROKER_CONFIG_REVISION?.trim();
  if (expected && expected !== revision) {
    throw new ConfigurationError(
      `invalid configuration: ${source} is revision ${revision}, the function was deployed with ${expected} (changed after synth?)`,
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch (cause) {
    throw new ConfigurationError(`invalid configuration: ${source}: not valid JSON`, { cause });
  }
  // The synth wrote this very file after checking it (verifyBrokerConfig): no zod at cold start for it.
  if (expected === revision) {
    return { document: value as BrokerConfigDocument, revision, source, vouched: true };
  }
  const result = documentSchema.safeParse(value, { error: unknownKeysError });
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = issue?.path.length ? `.${issue.path.join('.')}` : '';
    throw new ConfigurationError(
      `invalid configuration: ${source}${field}: ${issue?.message ?? 'not a configuration document'}`,
    );
  }
  return { document: result.data, revision, source, vouched: false };
}

/** What the functions take from a document: its sets, consumers and operators, typed. */
export interface BrokerConfigContentOf {
  sets: CredentialSetConfig[];
  consumers: ConsumerConfig[];
  operators: OperatorConfig[];
}

/** Every field of the document through the functions' own parsers; a wrong value names itself. */
export function parseBrokerConfig(document: BrokerConfigDocument, source: string): BrokerConfigContentOf {
  const sets = parseCredentialSets(document.credentialSets, `${source} credentialSets`);
  const setIds = sets.map((set) => set.id);
  const consumers = parseConsumers(document.consumers ?? [], setIds, `${source} consumers`);
  requireReservedConsumers(sets, consumers, `${source} credentialSets`);
  return {
    sets,
    consumers,
    operators: parseOperators(document.operators ?? [], setIds, `${source} operators`),
  };
}

/**
 * The document's content as the functions use it. Validating 500 consumers and 100 sets with zod in a fresh
 * process costs 15-20 ms of cold start (`npm run bench -- config-scale`), for a document the synth validated
 * already with these same parsers from the same commit; so a document the stack vouches for is used as written,
 * and any other (a local run, a test, a hand-made file) is validated field by field.
 */
export function brokerConfigContent(loaded: LoadedBrokerConfig): BrokerConfigContentOf {
  if (!loaded.vouched) return parseBrokerConfig(loaded.document, loaded.source);
  const { credentialSets, consumers = [], operators = [] } = loaded.document;
  return {
    sets: credentialSets as CredentialSetConfig[],
    consumers: consumers as ConsumerConfig[],
    operators: operators as OperatorConfig[],
  };
}

/**
 * At synth: the functions' own parsers must read the document exactly as written (every default filled in,
 * nothing dropped or changed), since a deployed function uses it without parsing it again.
 */
export function verifyBrokerConfig(document: BrokerConfigDocument, label: string): void {
  const parsed = parseBrokerConfig(document, label);
  const written = {
    sets: document.credentialSets,
    consumers: document.consumers ?? [],
    operators: document.operators ?? [],
  };
  if (!isDeepStrictEqual(JSON.parse(JSON.stringify(parsed)), written)) {
    throw new ConfigurationError(
      `${label}: the functions' parsers read the configuration document differently from how it is written`,
    );
  }
}
