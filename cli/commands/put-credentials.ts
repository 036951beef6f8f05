import { type PolicyDocument, secretReaderArns, secretResourcePolicy } from '../../infra/secret-policy.js';
import { UsageError } from '../errors.js';
import type { CliIo } from '../io.js';
import { HELP_OPTION, parseCommandLine } from '../options.js';
import { readCredentials } from '../secret-input.js';
import { writeCredentials } from '../secret-writer.js';
import { checkSetId } from '../set-id.js';
import { stageOption } from '../stage-source.js';

export const PUT_CREDENTIALS_HELP = `Usage: token-broker put-credentials <set> (--stage STAGE | --secret-id ID) [--region REGION] [--create] [--json]

Writes the vendor username and password of credential set <set> as a new version of its Secrets Manager
secret, as {"username": ..., "password": ...}. The refresher reads the secret at every run and, after a
rejected login, tries the new version at once.

With --stage, the secret's resource policy is put first, at every write (with BlockPublicPolicy): only the
stage's refresher role and its breakGlassPrincipals may read the value ("token-broker secret-policy <stage>"
prints it). A new secret is created without a value, given the policy, and only then the value.

The username and password are never taken from arguments (they would stay in the shell history):
  - on a terminal, you are asked for them; the password is not shown;
  - otherwise they are read from standard input: two lines (username, then password) or the JSON above,
    e.g.  token-broker put-credentials uat-advisor --stage uat < creds.json
Nothing of the password is printed.

Options:
  --stage STAGE     take the secret name and Region from the stage (infra/stages/, or a JSON file); a
                    two-Region stage's secrets are written in its home Region and replicated to its peer
  --secret-id ID    the secret's name or ARN instead (no resource policy is put: it needs the stage)
  --region REGION   the secret's Region (default: the stage's, else AWS_REGION / AWS_DEFAULT_REGION)
  --create          create the secret when it does not exist yet (otherwise that is an error; not for a
                    two-Region stage, whose global stack creates its secrets)
  --json            print {"credentialSet", "secretId", "region", "versionId", "created"} on stdout

Credentials: the default AWS chain; the caller needs secretsmanager:PutResourcePolicy (with --stage),
PutSecretValue, and CreateSecret for --create, on the secret.`;

const OPTIONS = {
  ...HELP_OPTION,
  stage: { type: 'string' },
  'secret-id': { type: 'string' },
  region: { type: 'string' },
  create: { type: 'boolean' },
  json: { type: 'boolean' },
} as const;

const COMMAND = 'put-credentials';

/** The secret and its Region, from the stage or from the options. */
function secretOf(
  setId: string,
  values: {
    stage?: string | undefined;
    'secret-id'?: string | undefined;
    region?: string | undefined;
    create?: boolean | undefined;
  },
  io: CliIo,
): { secretId: string; region: string; policy?: PolicyDocument; readers?: string[] } {
  if ((values.stage === undefined) === (values['secret-id'] === undefined)) {
    throw new UsageError('give exactly one of --stage or --secret-id', COMMAND);
  }
  if (values.stage !== undefined) {
    const stage = stageOption(COMMAND, values.stage, io.cwd);
    const set = stage.credentialSets.find((s) => s.id === setId);
    if (!set) {
      throw new UsageError(
        `stage "${stage.name}" has no credential set "${setId}"; its sets: ${stage.credentialSets.map((s) => s.id).join(', ')}`,
        COMMAND,
      );
    }
    if (stage.regions) twoRegionChecks(stage.name, stage.regions, values);
    return {
      secretId: set.secretName,
      region: values.region ?? stage.region,
      policy: secretResourcePolicy(stage),
      readers: secretReaderArns(stage),
    };
  }
  const region = values.region ?? io.env.AWS_REGION ?? io.env.AWS_DEFAULT_REGION;
  if (!region) throw new UsageError('no Region: give --region or set AWS_REGION', COMMAND);
  return { secretId: values['secret-id'] ?? '', region };
}

/**
 * A two-Region stage's secrets are its global stack's (infra/global-stacks.ts): written in home, where the primary
 * is, and replicated by Secrets Manager to the peer, whose replica takes no write; created by that stack, never
 * here (a secret created by hand would stop the stack creating it).
 */
function twoRegionChecks(
  stageName: string,
  regions: { home: string; peer: string },
  values: { region?: string | undefined; create?: boolean | undefined },
): void {
  if (values.region !== undefined && values.region !== regions.home) {
    throw new UsageError(
      `stage "${stageName}" has two Regions: its secrets are written in home (${regions.home}), whose primary Secrets Manager replicates to ${regions.peer}; a replica takes no write (leave out --region)`,
      COMMAND,
    );
  }
  if (values.create === true) {
    throw new UsageError(
      `stage "${stageName}" has two Regions: its secrets are created by the stack TokenBroker-${stageName}-global (deploy it first, docs/deploying.md, Two Regions), not by --create`,
      COMMAND,
    );
  }
}

export async function putCredentialsCommand(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommandLine(COMMAND, args, OPTIONS, { min: 1, max: 1, what: 'the credential set id' });
  if (parsed.help) {
    io.stdout.write(`${PUT_CREDENTIALS_HELP}\n`);
    return 0;
  }
  const setId = checkSetId(COMMAND, parsed.positionals[0]);
  const { secretId, region, policy, readers } = secretOf(setId, parsed.values, io);
  const credentials = await readCredentials(io.stdin, io.stderr, setId);
  io.stderr.write(`token-broker put-credentials: writing secret "${secretId}" in ${region} …\n`);
  if (!policy) {
    io.stderr.write(
      "token-broker put-credentials: no stage given: the secret's resource policy is neither put nor checked (use --stage for a stage's secret)\n",
    );
  }
  const client = await io.secretsManager(region);
  try {
    const written = await writeCredentials(client, {
      secretId,
      setId,
      credentials,
      create: parsed.values.create === true,
      ...(policy ? { policy } : {}),
    });
    if (written.policyPut) {
      io.stderr.write(
        `token-broker put-credentials: put the resource policy on secret "${secretId}" before its value: only ${readers?.join(', ')} may read it\n`,
      );
    }
    io.stderr.write(
      `token-broker put-credentials: ${written.created ? 'created' : 'wrote a new version of'} secret "${secretId}" (version ${written.versionId ?? 'unknown'}) for ${setId}; the refresher uses it at its next run\n`,
    );
    if (parsed.values.json) {
      io.stdout.write(
        `${JSON.stringify({ credentialSet: setId, secretId, region, versionId: written.versionId ?? null, created: written.created }, null, 2)}\n`,
      );
    }
    return 0;
  } finally {
    client.destroy();
  }
}
