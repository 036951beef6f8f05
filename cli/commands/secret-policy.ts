import { policyText, secretReaderArns, secretResourcePolicy } from '../../infra/secret-policy.js';
import { parseStageConfig } from '../../infra/stage-config.js';
import type { CliIo } from '../io.js';
import { HELP_OPTION, parseCommandLine } from '../options.js';
import { loadStageInput } from '../stage-source.js';

export const SECRET_POLICY_HELP = `Usage: token-broker secret-policy <stage | file.json>

Prints on stdout the resource policy every vendor secret of the stage must carry (offline, no AWS
credentials): a Deny of secretsmanager:GetSecretValue to every principal but the stage's refresher role
(token-broker-<stage>-refresher) and its breakGlassPrincipals. "token-broker put-credentials --stage"
puts it by itself; to put it with the AWS CLI:

  npx token-broker secret-policy uat > policy.json
  aws secretsmanager put-resource-policy --region eu-west-1 --secret-id token-broker/uat/advisor \\
    --resource-policy file://policy.json --block-public-policy

"token-broker check-config <stage> --secrets" reports a secret without it, or with another one.`;

const COMMAND = 'secret-policy';

export async function secretPolicyCommand(args: string[], io: CliIo): Promise<number> {
  const parsed = parseCommandLine(COMMAND, args, HELP_OPTION, {
    min: 1,
    max: 1,
    what: 'the stage name or file',
  });
  if (parsed.help) {
    io.stdout.write(`${SECRET_POLICY_HELP}\n`);
    return 0;
  }
  const stage = parseStageConfig(loadStageInput(COMMAND, parsed.positionals[0] ?? '', io.cwd).input);
  io.stdout.write(`${policyText(secretResourcePolicy(stage))}\n`);
  io.stderr.write(
    `token-broker secret-policy: stage "${stage.name}": only ${secretReaderArns(stage).join(', ')} may read the values of:\n`,
  );
  for (const name of new Set(stage.credentialSets.map((set) => set.secretName))) {
    io.stderr.write(
      `  aws secretsmanager put-resource-policy --region ${stage.region} --secret-id ${name} --resource-policy file://policy.json --block-public-policy\n`,
    );
  }
  return 0;
}
