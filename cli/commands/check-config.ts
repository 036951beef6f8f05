import type * as z from 'zod';
import {
  functionCredentialSets,
  type StageConfig,
  type StageInput,
  stageConfigSchema,
} from '../../infra/stage-config.js';
import { ConfigurationError } from '../../shared/errors.js';
import { ExitCode } from '../exit-codes.js';
import type { CliIo } from '../io.js';
import { HELP_OPTION, parseCommandLine } from '../options.js';
import { loadStageInput } from '../stage-source.js';

export const CHECK_CONFIG_HELP = `Usage: token-broker check-config <stage | file.json> [--strict] [--json]

Validates a stage's configuration before a deploy, offline and without AWS credentials: the schema of
infra/stage-config.ts (accounts, Regions, HTTPS vendor URLs, environments, thresholds, consumers and the
sets they name, alarm targets) and the stack's own checks (the functions' 4 KB environment). Every error
names its field, e.g. "uat.credentialSets[0].vendorBaseUrl: must be https:// in a deployed stage".

<stage> is a stage of infra/stages/ (uat, prod) or a path to a JSON file of the same shape.

Options:
  --strict  warnings fail too (placeholder account ids, example.com addresses, a relative runbook URL)
  --json    {"stage", "valid", "errors": [{"field", "message"}], "warnings": [...], "summary"} on stdout

Exit code 0 when valid, 2 when not (or with --strict and warnings).`;

const OPTIONS = { ...HELP_OPTION, strict: { type: 'boolean' }, json: { type: 'boolean' } } as const;

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
  return error.issues.map((issue) => ({ field: fieldOf(root, issue.path), message: issue.message }));
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
  if (!/^https?:\/\//.test(stage.runbookUrl)) {
    found.push({
      field: `${root}.runbookUrl`,
      message: 'not an http(s) URL: the links in alarm descriptions will not be clickable',
    });
  }
  return found;
}

/** The checks `cdk synth` makes when it builds the stack (e.g. the environment size), without bundling. */
async function stackErrors(stage: StageConfig, input: StageInput): Promise<Finding[]> {
  const { createBrokerApp } = await import('../../infra/broker-app.js');
  try {
    createBrokerApp({
      stages: [input],
      context: { stage: stage.name, 'aws:cdk:bundling-stacks': [] },
    });
    return [];
  } catch (error) {
    if (error instanceof ConfigurationError) return [{ field: stage.name, message: error.message }];
    throw error;
  }
}

function summaryOf(stage: StageConfig) {
  const environmentBytes =
    Buffer.byteLength(JSON.stringify(functionCredentialSets(stage))) +
    Buffer.byteLength(JSON.stringify(stage.consumers));
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
    })),
    consumers: stage.consumers.map((c) => ({ name: c.name, credentialSets: c.credentialSets })),
    configurationBytes: environmentBytes,
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
  const result = stageConfigSchema.safeParse(input);
  let errors = result.success ? [] : schemaErrors(root, result.error);
  const warnings = result.success ? warningsOf(result.data) : [];
  if (result.success) errors = await stackErrors(result.data, input);
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
        (s) => `    ${s.id} [${s.companyRole}] → ${s.vendorBaseUrl}, secret ${s.secretName}`,
      ),
      `  consumers (${summary.consumers.length}):`,
      ...summary.consumers.map((c) => `    ${c.name} → ${c.credentialSets.join(', ')}`),
      `  configuration in the functions' environment: ${summary.configurationBytes} bytes (Lambda allows 4096 in all)`,
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
