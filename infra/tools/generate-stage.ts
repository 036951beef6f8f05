import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { StageInput } from '../stage-config.js';

/**
 * A company-sized stage for scale checks: `consumers` services spread over `accounts` AWS accounts, each using
 * one to three of `sets` credential sets (every set used by someone), and two operators. Deterministic: the
 * same sizes give the same stage, so the bench and the tests measure one thing.
 *
 *   npx tsx infra/tools/generate-stage.ts --consumers 500 --sets 100 --out /tmp/stage-500.json
 *   npx token-broker check-config /tmp/stage-500.json && npx cdk synth -c stageFile=/tmp/stage-500.json
 */
export interface GeneratedStageOptions {
  consumers: number;
  sets: number;
  /** Accounts the consumers' roles live in; the first is the stage's own. */
  accounts?: number;
  name?: string;
  /** The AWS Organization the accounts belong to, when the Function URL is granted to it (urlAccess). */
  organizationId?: string;
}

const accountId = (index: number): string => String(100_000_000_000 + index * 1_111);

export function generateStage(options: GeneratedStageOptions): StageInput {
  const { consumers, sets, accounts = 10, name = 'scale' } = options;
  const home = accountId(0);
  const setIds = Array.from({ length: sets }, (_, i) => `uat-role-${String(i).padStart(3, '0')}`);
  return {
    name,
    account: home,
    region: 'eu-west-1',
    vendorEnvironment: 'uat',
    production: false,
    credentialSets: setIds.map((id, i) => ({
      id,
      environment: 'uat',
      companyRole: `role-${i}`,
      vendorBaseUrl: 'https://uat.pms-vendor.example.com',
      secretName: `token-broker/${name}/${id}`,
    })),
    consumers: Array.from({ length: consumers }, (_, i) => ({
      name: `service-${String(i).padStart(4, '0')}`,
      principalArn: `arn:aws:iam::${accountId(i % accounts)}:role/service-${String(i).padStart(4, '0')}-${name}`,
      // One to three sets each, walking through all of them so that every set has consumers.
      credentialSets: Array.from(
        { length: 1 + (i % 3) },
        (_, k) => setIds[(i + k * 37) % sets] as string,
      ).filter((id, k, all) => all.indexOf(id) === k),
    })),
    operators: [
      { name: 'oncall', principalArn: `arn:aws:iam::${home}:role/token-broker-oncall-${name}` },
      {
        name: 'status-dashboard',
        principalArn: `arn:aws:iam::${home}:role/status-dashboard-${name}`,
        credentialSets: setIds.slice(0, Math.min(10, sets)),
      },
    ],
    breakGlassPrincipals: [`arn:aws:iam::${home}:role/token-broker-break-glass-${name}`],
    alarms: { emails: ['token-broker-alerts@example.com'] },
    ...(options.organizationId ? { urlAccess: { organizationId: options.organizationId } } : {}),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({
    options: {
      consumers: { type: 'string', default: '500' },
      sets: { type: 'string', default: '100' },
      accounts: { type: 'string', default: '10' },
      name: { type: 'string', default: 'scale' },
      out: { type: 'string' },
    },
  });
  const stage = generateStage({
    consumers: Number(values.consumers),
    sets: Number(values.sets),
    accounts: Number(values.accounts),
    name: values.name,
  });
  const text = `${JSON.stringify(stage, null, 2)}\n`;
  if (values.out) writeFileSync(values.out, text);
  else process.stdout.write(text);
}
