import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import * as z from 'zod';
import { ConfigurationError } from '../errors.js';

/**
 * The functions' configuration registry: one JSON document per function, written at synth from the stage
 * (infra/function-config.ts) into the function's own code asset, beside the bundle, and read once at cold start.
 *
 * Why a file in the code asset, and not the environment, SSM, AppConfig or a DynamoDB item:
 * - Size: Lambda's environment holds 4 KB in all (about 20 consumers); an SSM parameter 4 KB (8 KB advanced);
 *   a code asset holds megabytes. 500 consumers and 100 sets are about 100 KB.
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
 * `revision` is a hash of the document's content: the functions log it at cold start and the stack sets it as
 * `BROKER_CONFIG_REVISION`, so the console, `cdk diff` and the logs all say which configuration a version runs.
 */
export const BROKER_CONFIG_FILE = 'broker-config.json';
export const BROKER_CONFIG_FORMAT = 1;

const documentSchema = z.object({
  format: z.literal(BROKER_CONFIG_FORMAT),
  stage: z.string().min(1),
  revision: z.string().regex(/^[0-9a-f]{16}$/),
  credentialSets: z.array(z.unknown()),
  consumers: z.array(z.unknown()).optional(),
  operators: z.array(z.unknown()).optional(),
});

export interface BrokerConfigContent {
  stage: string;
  credentialSets: unknown[];
  consumers?: unknown[];
  operators?: unknown[];
}

export type BrokerConfigDocument = z.infer<typeof documentSchema>;

/** The document for `content`, its revision computed from the content (the same content, the same revision). */
export function brokerConfigDocument(content: BrokerConfigContent): BrokerConfigDocument {
  const body = {
    stage: content.stage,
    credentialSets: content.credentialSets,
    ...(content.consumers ? { consumers: content.consumers } : {}),
    ...(content.operators ? { operators: content.operators } : {}),
  };
  const revision = createHash('sha256').update(JSON.stringify(body)).digest('hex').slice(0, 16);
  return { format: BROKER_CONFIG_FORMAT, revision, ...body };
}

/** A document as read at cold start, with the name errors give it. */
export interface LoadedBrokerConfig {
  document: BrokerConfigDocument;
  /** `broker-config.json` (or the file BROKER_CONFIG_FILE names): the prefix of every error about its fields. */
  source: string;
}

/**
 * Reads the function's configuration document: BROKER_CONFIG_FILE if set (a path, relative to the working
 * directory), else `broker-config.json` beside the code (LAMBDA_TASK_ROOT on Lambda). When the stack gave a
 * BROKER_CONFIG_REVISION, the document must be that revision. A missing, unreadable or wrong file fails the cold
 * start with a message naming it.
 */
export function readBrokerConfig(env: Record<string, string | undefined>): LoadedBrokerConfig {
  const file = env.BROKER_CONFIG_FILE?.trim()
    ? path.resolve(env.BROKER_CONFIG_FILE.trim())
    : path.join(env.LAMBDA_TASK_ROOT?.trim() || process.cwd(), BROKER_CONFIG_FILE);
  const source = path.basename(file);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new ConfigurationError(
      `invalid configuration: the configuration document ${file} cannot be read (${code})`,
      { cause },
    );
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (cause) {
    throw new ConfigurationError(`invalid configuration: ${source}: not valid JSON`, { cause });
  }
  const result = documentSchema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0];
    const field = issue?.path.length ? `.${issue.path.join('.')}` : '';
    throw new ConfigurationError(
      `invalid configuration: ${source}${field}: ${issue?.message ?? 'not a configuration document'}`,
    );
  }
  // The revision is the content's hash: a document edited by hand (or cut short) is refused, not half-used.
  const { stage, credentialSets, consumers, operators } = result.data;
  if (
    brokerConfigDocument({ stage, credentialSets, consumers, operators }).revision !== result.data.revision
  ) {
    throw new ConfigurationError(
      `invalid configuration: ${source}: revision ${result.data.revision} does not match its content (edited after synth?)`,
    );
  }
  const expected = env.BROKER_CONFIG_REVISION?.trim();
  if (expected && expected !== result.data.revision) {
    throw new ConfigurationError(
      `invalid configuration: ${source} is revision ${result.data.revision}, the function was deployed with ${expected}`,
    );
  }
  return { document: result.data, source };
}
