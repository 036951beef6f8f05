import {
  GetResourcePolicyCommand,
  type SecretsManagerClient,
  SecretsManagerServiceException,
} from '@aws-sdk/client-secrets-manager';
import type * as z from 'zod';
import {
  peerRefresherRoleArn,
  refresherRoleArn,
  sameSecretPolicy,
  secretResourcePolicy,
} from '../../infra/secret-policy.js';
import { servingStacks } from '../../infra/stack-names.js';
import {
  callerAccounts,
  functionConfigDocuments,
  MAX_CONFIG_DOCUMENT_BYTES,
  MAX_URL_ACCOUNTS,
  type StageConfig,
  type StageInput,
  stageConfigSchema,
} from '../../infra/stage-config.js';
import { brokerConfigText, configRevision } from '../../shared/config/broker-config.js';
import { plainIssues, unknownKeysError } from '../../shared/config/unknown-keys.js';
import { ConfigurationError } from '../../shared/errors.js';
import { StackChecksUnavailableError } from '../errors.js';
import { ExitCode } from '../exit-codes.js';
import type { CliIo } from '../io.js';
import { HELP_OPTION, parseCommandLine } from '../options.js';
import { loadStageInput } from '../stage-source.js';

export const CHECK_CONFIG_HELP = `Usage: token-broker check-config <stage | file.json> [--strict] [--json] [--secrets]

Validates a stage's configuration before a deploy, offline and without AWS credentials (unless --secrets):
the schema of infra/stage-config.ts (accounts, Regions, HTTPS vendor URLs, environments, thresholds,
consumers, operators and the sets they name, sets of one secret (one vendor user: one quotaScope, and with
"user" one budget and one rateLimits), break-glass principals, alarm targets, the accounts the Function URL
is granted to, the size of the functions' configuration document) and the stack's own checks.
Every error names its field, e.g.
"uat.credentialSets[0].vendorBaseUrl: must be https:// in a deployed stage".

<stage> is a stage of infra/stages/ (uat, prod, and the example two-Region stage prod-regions) or a path to a
JSON file of the same shape.

Options:
  --strict   warnings fail too (placeholder account ids, example.com addresses, the example runbook URL,
             and with --secrets every secret finding)
  --json     {"stage", "valid", "errors": [{"field", "message"}], "warnings": [...], "summary"} on stdout
  --secrets  also ask Secrets Manager (the stage's Region, default AWS credentials) whether every secret
             of the stage exists and carries the stage's resource policy ("token-broker secret-policy
             <stage>" prints it): a secret without it, or with another one, is a warning. Reads only the
             policies (secretsmanager:GetResourcePolicy), never a secret's value.

Exit code 0 when valid, 2 when not (or with --strict and warnings).`;

const OPTIONS = {
  ...HELP_OPTION,
  strict: { type: 'boolean' },
  json: { type: 'boolean' },
  secrets: { type: 'boolean' },
} as const;

export interface Finding {
  field: string;
  message: string;
}

/** `uat.credentialSets[0].vendorBaseUrl`, as describeIssues names fields everywhere else. */
function fieldOf(root: string, path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (acc, part) => (typeof part === 'number' ? `${acc}[${part}]` : `${acc}.${String(part)}`),
    root,
  );
}

function schemaErrors(root: string, error: z.ZodError): Finding[] {
  return plainIssues(error.issues).map((issue) => ({
    field: fieldOf(root, issue.path),
    message: issue.message,
  }));
}

/** What is valid but almost certainly not meant for a real deploy. */
function warningsOf(stage: StageConfig): Finding[] {
  const found: Finding[] = [];
  const root = stage.name;
  if (/^(\d)\1{11}$/.test(stage.account)) {
    found.push({ field: `${root}.account`, message: `${stage.account} looks like a placeholder account id` });
  }
  stage.credentialSets.forEach((set, i) => {
    if (/\.example\.(com|org|net)$/.test(new URL(set.vendorBaseUrl).hostname)) {
      found.push({ field: `${root}.credentialSets[${i}].vendorBaseUrl`, message: 'an example.com address' });
    }
  });
  stage.alarms.emails.forEach((email, i) => {
    if (/@example\.(com|org|net)$/.test(email)) {
      found.push({
        field: `${root}.alarms.emails[${i}]`,
        message: 'an example.com address: nobody is paged',
      });
    }
  });
  if (/\.example\.(com|org|net)$/.test(new URL(stage.runbookUrl).hostname)) {
    found.push({
      field: `${root}.runbookUrl`,
      message: 'an example.com address: the links in alarm descriptions lead nowhere',
    });
  }
  return found;
}

/** The checks `cdk synth` makes when it builds the stack (e.g. the environment size), without bundling. */
async function stackErrors(stage: StageConfig, input: StageInput, io: CliIo): Promise<Finding[]> {
  const { createBrokerApp } = await import('../../infra/broker-app.js');
  try {
    createBrokerApp({
      stages: [input],
      context: { stage: stage.name, 'aws:cdk:bundling-stacks': [] },
    });
    return [];
  } catch (error) {
    if (error instanceof ConfigurationError) return [{ field: stage.name, message: error.message }];
    if (error instanceof StackChecksUnavailableError) {
      io.stderr.write(
        "note: the stack's own checks (those `cdk synth` makes) need the repository (npx token-broker check-config there); this package ran the schema checks\n",
      );
      return [];
    }
    throw error;
  }
}

/**
 * Per secret of the stage: missing, without the stage's resource policy, or with another one. Only the
 * policy is read (GetResourcePolicy), never the value; a failure to read names the service's error only.
 */
export async function secretFindings(client: SecretsManagerClient, stage: StageConfig): Promise<Finding[]> {
  const expected = secretResourcePolicy(stage);
  const found: Finding[] = [];
  const checked = new Set<string>();
  for (const [index, set] of stage.credentialSets.entries()) {
    if (checked.has(set.secretName)) continue;
    checked.add(set.secretName);
    const field = `${stage.name}.credentialSets[${index}].secretName`;
    const fix = `"token-broker put-credentials ${set.id} --stage ${stage.name}" puts it (docs/deploying.md)`;
    let text: string | undefined;
    try {
      text = (await client.send(new GetResourcePolicyCommand({ SecretId: set.secretName })))?.ResourcePolicy;
    } catch (error) {
      const code = error instanceof SecretsManagerServiceException ? error.name : 'NETWORK_ERROR';
      found.push({
        field,
        message:
          code === 'ResourceNotFoundException'
            ? stage.regions
              ? `secret "${set.secretName}" does not exist in ${stage.region}; the stack TokenBroker-${stage.name}-global creates it (docs/deploying.md, Two Regions)`
              : `secret "${set.secretName}" does not exist in ${stage.region}; "token-broker put-credentials ${set.id} --stage ${stage.name} --create" creates it with its resource policy`
            : `the resource policy of secret "${set.secretName}" could not be read (${code})`,
      });
      continue;
    }
    if (!text) {
      found.push({
        field,
        message: `secret "${set.secretName}" has no resource policy: any principal of the account allowed secretsmanager:GetSecretValue reads it; ${fix}`,
      });
      continue;
    }
    let actual: unknown;
    try {
      actual = JSON.parse(text);
    } catch {
      actual = undefined;
    }
    if (!sameSecretPolicy(actual, expected)) {
      found.push({
        field,
        message: `secret "${set.secretName}" has a resource policy other than the stage's ("token-broker secret-policy ${stage.name}" prints the stage's); ${fix}`,
      });
    }
  }
  return found;
}

function summaryOf(stage: StageConfig) {
  const document = functionConfigDocuments(stage).vend;
  return {
    account: stage.account,
    region: stage.region,
    vendorEnvironment: stage.vendorEnvironment,
    production: stage.production,
    credentialSets: stage.credentialSets.map((s) => ({
      id: s.id,
      companyRole: s.companyRole,
      vendorBaseUrl: s.vendorBaseUrl,
      secretName: s.secretName,
      quotaScope: s.quotaScope,
      // The other sets of the vendor user's one budget (quotaScope "user", one secret).
      ...(s.quotaScope === 'user'
        ? {
            budgetSharedWith: stage.credentialSets
              .filter((o) => o.id !== s.id && o.quotaScope === 'user' && o.secretName === s.secretName)
              .map((o) => o.id),
          }
        : {}),
    })),
    consumers: stage.consumers.map((c) => ({ name: c.name, credentialSets: c.credentialSets })),
    operators: stage.operators.map((o) => ({
      name: o.name,
      credentialSets: o.credentialSets ?? stage.credentialSets.map((set) => set.id),
    })),
    /** Who may read the secrets' values: the refresher's role (each Region's), then the break-glass principals. */
    secretReaders: {
      refresher: refresherRoleArn(stage),
      ...(stage.regions ? { peerRefresher: peerRefresherRoleArn(stage, stage.regions.peer) } : {}),
      breakGlass: stage.breakGlassPrincipals,
    },
    /** Each serving stack and its Region: its `VendUrl` output is that Region's broker URL. */
    servingStacks: servingStacks(stage),
    ...(stage.regions ? { regions: stage.regions } : {}),
    /** The vend function's configuration document (broker-config.json in its code asset). */
    configurationDocument: {
      bytes: Buffer.byteLength(JSON.stringify(document)),
      maxBytes: MAX_CONFIG_DOCUMENT_BYTES,
      revision: configRevision(brokerConfigText(document)),
    },
    /** Who may reach the Function URL: the organization, or each caller account. */
    urlAccess: stage.urlAccess.organizationId
      ? { organizationId: stage.urlAccess.organizationId }
      : { accounts: callerAccounts(stage), maxAccounts: MAX_URL_ACCOUNTS },
  };
}

export async function checkConfigCommand(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommandLine('check-config', args, OPTIONS, {
    min: 1,
    max: 1,
    what: 'the stage name or file',
  });
  if (parsed.help) {
    io.stdout.write(`${CHECK_CONFIG_HELP}\n`);
    return 0;
  }
  const [nameOrPath = ''] = parsed.positionals;
  const { input, source } = loadStageInput('check-config', nameOrPath, io.cwd);
  const root = typeof input?.name === 'string' && input.name ? input.name : 'stage';
  io.stderr.write(`token-broker check-config: checking stage "${root}" from ${source} …\n`);
  const result = stageConfigSchema.safeParse(input, { error: unknownKeysError });
  let errors = result.success ? [] : schemaErrors(root, result.error);
  const warnings = result.success ? warningsOf(result.data) : [];
  if (result.success) errors = await stackErrors(result.data, input, io);
  if (result.success && errors.length === 0 && parsed.values.secrets) {
    const stage = result.data;
    io.stderr.write(
      `token-broker check-config: reading the resource policies of the stage's secrets in ${stage.region} …\n`,
    );
    const client = await io.secretsManager(stage.region);
    try {
      warnings.push(...(await secretFindings(client, stage)));
    } finally {
      client.destroy();
    }
  }
  const failed = errors.length > 0 || (parsed.values.strict === true && warnings.length > 0);
  const summary = result.success && errors.length === 0 ? summaryOf(result.data) : null;

  if (parsed.values.json) {
    io.stdout.write(
      `${JSON.stringify({ stage: root, valid: !failed, errors, warnings, summary }, null, 2)}\n`,
    );
  } else if (summary) {
    const lines = [
      `stage ${root}: ${failed ? 'INVALID (warnings with --strict)' : 'valid'}`,
      `  account ${summary.account}, Region ${summary.region}, vendor environment ${summary.vendorEnvironment}, production: ${summary.production ? 'yes' : 'no'}`,
      `  credential sets (${summary.credentialSets.length}):`,
      ...summary.credentialSets.map(
        (s) =>
          `    ${s.id} [${s.companyRole}] → ${s.vendorBaseUrl}, secret ${s.secretName}, quota per ${s.quotaScope}${s.budgetSharedWith?.length ? ` (one budget with ${s.budgetSharedWith.join(', ')})` : ''}`,
      ),
      `  consumers (${summary.consumers.length}):`,
      ...summary.consumers.map((c) => `    ${c.name} → ${c.credentialSets.join(', ')}`),
      `  operators, status only (${summary.operators.length}):`,
      ...summary.operators.map((o) => `    ${o.name} → ${o.credentialSets.join(', ')}`),
      `  secret readers: ${summary.secretReaders.refresher} (refresher), ${summary.secretReaders.peerRefresher ? `${summary.secretReaders.peerRefresher} (the peer's refresher), ` : ''}${summary.secretReaders.breakGlass.map((arn) => `${arn} (break-glass)`).join(', ') || 'no break-glass principal'}`,
      ...(summary.regions
        ? [
            `  two Regions: home ${summary.regions.home}, peer ${summary.regions.peer}, witness ${summary.regions.witness} (the MRSC table's quorum only)`,
          ]
        : []),
      `  serving stacks (each one's VendUrl output is its Region's broker URL): ${summary.servingStacks.map((s) => `${s.stackName} in ${s.region}`).join(', ')}`,
      `  configuration document of the vend function: ${summary.configurationDocument.bytes} bytes (at most ${summary.configurationDocument.maxBytes}), revision ${summary.configurationDocument.revision}`,
      'organizationId' in summary.urlAccess
        ? `  Function URL granted to the organization ${summary.urlAccess.organizationId}`
        : `  Function URL granted to the accounts ${summary.urlAccess.accounts.join(', ')} (${summary.urlAccess.accounts.length} of at most ${summary.urlAccess.maxAccounts} without urlAccess.organizationId)`,
      parsed.values.secrets
        ? "  secrets' resource policies: checked in Secrets Manager (findings below)"
        : "  secrets' resource policies: not checked (offline); --secrets asks Secrets Manager",
    ];
    io.stdout.write(`${lines.join('\n')}\n`);
  }
  if (!parsed.values.json) {
    for (const w of warnings) io.stderr.write(`warning: ${w.field}: ${w.message}\n`);
    for (const e of errors) io.stderr.write(`error: ${e.field}: ${e.message}\n`);
  }
  if (!failed) return ExitCode.Ok;
  const what = errors.length > 0 ? `${errors.length} error(s)` : `${warnings.length} warning(s) (--strict)`;
  throw new ConfigurationError(`stage "${root}" is not valid: ${what}`);
}
