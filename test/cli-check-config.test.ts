import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { prod } from '../infra/stages/prod.js';
import { uat } from '../infra/stages/uat.js';
import { runIn } from './support/cli-harness.js';
import { variant } from './support/stage-variants.js';

/** `token-broker check-config`: what a pipeline runs before a deploy. Offline, no AWS credentials. */
const dir = mkdtempSync(join(tmpdir(), 'cli-stages-'));
let files = 0;
function stageFile(stage: unknown): string {
  const path = join(dir, `stage-${++files}.json`);
  writeFileSync(path, JSON.stringify(stage));
  return path;
}
/** A stage as a real team would have it: its own account, real addresses, a clickable runbook. */
const realistic = variant(prod, (s) =>
  Object.assign(s, {
    account: '123456789012',
    credentialSets: s.credentialSets.map((set) => ({ ...set, vendorBaseUrl: 'https://api.pms-vendor.com' })),
    alarms: { emails: ['token-broker-oncall@corp.invalid'] },
    operators: [{ name: 'oncall', principalArn: 'arn:aws:iam::123456789012:role/token-broker-oncall' }],
    breakGlassPrincipals: ['arn:aws:iam::123456789012:role/token-broker-break-glass'],
    runbookUrl: 'https://git.corp.invalid/platform/token-broker/blob/main/docs/runbook.md',
  }),
);

describe('token-broker check-config', () => {
  it('accepts the committed stages by name, summarises them, and warns about their placeholders', async () => {
    for (const stage of [uat, prod]) {
      const run = await runIn(['check-config', stage.name]);
      expect(run.exit, run.stderr).toBe(0);
      expect(run.stdout).toContain(`stage ${stage.name}: valid`);
      expect(run.stdout).toContain(
        `account ${stage.account}, Region eu-west-1, vendor environment ${stage.name}`,
      );
      for (const set of stage.credentialSets) {
        expect(run.stdout).toContain(
          `    ${set.id} [${set.companyRole}] → ${set.vendorBaseUrl}, secret ${set.secretName}`,
        );
      }
      expect(run.stdout).toMatch(
        /configuration document of the vend function: \d+ bytes \(at most 1048576\), revision [0-9a-f]{16}/,
      );
      const accounts = [
        ...new Set([...stage.consumers, ...stage.operators].map((c) => c.principalArn.split(':')[4])),
      ];
      expect(run.stdout).toContain(`Function URL granted to the accounts ${accounts.join(', ')} (`);
      expect(run.stderr).toContain(
        `warning: ${stage.name}.account: ${stage.account} looks like a placeholder account id`,
      );
      expect(run.stderr).toContain(`warning: ${stage.name}.runbookUrl: an example.com address`);
    }
  });

  it('accepts the example two-Region stage by name: its Regions, both serving stacks and both refreshers', async () => {
    const run = await runIn(['check-config', 'prod-regions']);
    expect(run.exit, run.stderr).toBe(0);
    expect(run.stdout).toContain('stage prod-regions: valid');
    expect(run.stdout).toContain('  two Regions: home eu-west-1, peer eu-central-1, witness eu-west-2');
    expect(run.stdout).toContain(
      "  serving stacks (each one's VendUrl output is its Region's broker URL): TokenBroker-prod-regions in eu-west-1, TokenBroker-prod-regions-eu-central-1 in eu-central-1",
    );
    expect(run.stdout).toContain(
      "arn:aws:iam::555555555555:role/token-broker-prod-regions-eu-central-1-refresher (the peer's refresher)",
    );
    const json = JSON.parse((await runIn(['check-config', 'prod-regions', '--json'])).stdout);
    expect(json.summary.servingStacks).toEqual([
      { stackName: 'TokenBroker-prod-regions', region: 'eu-west-1', role: 'home' },
      { stackName: 'TokenBroker-prod-regions-eu-central-1', region: 'eu-central-1', role: 'peer' },
    ]);
    // A one-Region stage: its one stack.
    const one = JSON.parse((await runIn(['check-config', 'uat', '--json'])).stdout);
    expect(one.summary.servingStacks).toEqual([
      { stackName: 'TokenBroker-uat', region: 'eu-west-1', role: 'only' },
    ]);
  });

  it('--strict turns the warnings into a failure (exit 2); a realistic stage passes it', async () => {
    const strict = await runIn(['check-config', 'uat', '--strict']);
    expect(strict.exit).toBe(2);
    expect(strict.stderr).toMatch(
      /error CONFIGURATION_INVALID: stage "uat" is not valid: 5 warning\(s\) \(--strict\)\n$/,
    );
    const clean = await runIn(['check-config', stageFile(realistic), '--strict']);
    expect(clean.exit, clean.stderr).toBe(0);
    expect(clean.stderr).not.toContain('warning');
  });

  it('refuses a wrong stage file with exit 2 and one line per error, each naming its field', async () => {
    const broken = variant(realistic, (s) => {
      Object.assign(s, { region: 'Europe' });
      Object.assign(s.credentialSets[0] ?? {}, { vendorBaseUrl: 'http://api.pms-vendor.com' });
      Object.assign(s.credentialSets[1] ?? {}, { environment: 'uat' });
      s.consumers[0]?.credentialSets.push('uat-advisor');
    });
    const run = await runIn(['check-config', stageFile(broken)]);
    expect(run.exit).toBe(2);
    expect(run.stdout).toBe('');
    const errors = run.stderr.split('\n').filter((line) => line.startsWith('error: '));
    expect(errors).toEqual([
      'error: prod.region: an AWS Region such as eu-west-1',
      'error: prod.credentialSets[0].vendorBaseUrl: must be https:// (plain http:// is accepted only for loopback addresses)',
      'error: prod.credentialSets[0].vendorBaseUrl: must be https:// in a deployed stage',
      'error: prod.credentialSets[1].environment: "uat" in a stage for the vendor\'s "prod" environment',
      'error: prod.consumers[0].credentialSets[2]: unknown credential set "uat-advisor"',
    ]);
    expect(run.stderr).toMatch(
      /token-broker check-config: error CONFIGURATION_INVALID: stage "prod" is not valid: 5 error\(s\)\n$/,
    );
  });

  it('refuses two sets of one secret (one vendor user) that cannot share its budget, naming both (exit 2)', async () => {
    const oneSecret = (rateLimits: object) =>
      variant(realistic, (s) => {
        const [a, b] = s.credentialSets;
        Object.assign(a ?? {}, { quotaScope: 'user' });
        Object.assign(b ?? {}, { quotaScope: 'user', secretName: a?.secretName, rateLimits });
      });
    const alike = await runIn(['check-config', stageFile(oneSecret({}))]);
    expect(alike.exit, alike.stderr).toBe(0);
    expect(alike.stdout).toContain(
      `    prod-execution [execution-platform] → https://api.pms-vendor.com, secret ${realistic.credentialSets[0]?.secretName}, quota per user (one budget with prod-advisor)`,
    );
    const run = await runIn(['check-config', stageFile(oneSecret({ marginSeconds: 5 }))]);
    expect(run.exit).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr.split('\n').filter((line) => line.startsWith('error: '))).toEqual([
      `error: prod.credentialSets[1].rateLimits: "prod-execution" and "prod-advisor" log in with one secret ("${realistic.credentialSets[0]?.secretName}"), i.e. as one vendor user, and with quotaScope "user" both draw on the user's one budget: their rateLimits must be the same (they differ in marginSeconds)`,
    ]);
    const mixed = variant(oneSecret({}), (s) =>
      Object.assign(s.credentialSets[0] ?? {}, { quotaScope: 'token' }),
    );
    const scopes = await runIn(['check-config', stageFile(mixed)]);
    expect(scopes.exit).toBe(2);
    expect(scopes.stderr).toContain(
      'error: prod.credentialSets[1].quotaScope: "prod-execution" and "prod-advisor" log in with one secret',
    );
  });

  it('runs the stack’s own checks too: a p99 latency alarm above the vend near-timeout alarm fails', async () => {
    const slow = variant(realistic, (s) => Object.assign(s.alarms, { vendLatencyP99Ms: 60_000 }));
    const run = await runIn(['check-config', stageFile(slow), '--json']);
    expect(run.exit).toBe(2);
    const report = JSON.parse(run.stdout);
    expect(report).toMatchObject({ stage: 'prod', valid: false, summary: null });
    expect(report.errors).toEqual([
      {
        field: 'prod',
        message: expect.stringMatching(
          /alarms\.vendLatencyP99Ms \(60000\) must be below the vend near-timeout alarm's \d+ ms/,
        ),
      },
    ]);
  });

  it('--json reports a valid stage with its summary, for pipelines that parse it', async () => {
    const run = await runIn(['check-config', stageFile(realistic), '--json']);
    expect(run.exit).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({
      stage: 'prod',
      valid: true,
      errors: [],
      warnings: [],
      summary: {
        account: '123456789012',
        region: 'eu-west-1',
        vendorEnvironment: 'prod',
        production: true,
        credentialSets: realistic.credentialSets.map((s) => ({
          id: s.id,
          companyRole: s.companyRole,
          vendorBaseUrl: 'https://api.pms-vendor.com',
          secretName: s.secretName,
          quotaScope: 'token',
        })),
        consumers: realistic.consumers.map((c) => ({ name: c.name, credentialSets: c.credentialSets })),
        operators: [{ name: 'oncall', credentialSets: ['prod-advisor', 'prod-execution'] }],
        secretReaders: {
          refresher: 'arn:aws:iam::123456789012:role/token-broker-prod-refresher',
          breakGlass: ['arn:aws:iam::123456789012:role/token-broker-break-glass'],
        },
        servingStacks: [{ stackName: 'TokenBroker-prod', region: 'eu-west-1', role: 'only' }],
        configurationDocument: {
          bytes: expect.any(Number),
          maxBytes: 1048576,
          revision: expect.stringMatching(/^[0-9a-f]{16}$/),
        },
        urlAccess: { accounts: ['222222222222', '333333333333', '123456789012'], maxAccounts: 20 },
      },
    });
  });

  it('says which stages exist for an unknown name, and what is wrong with an unreadable file (exit 2)', async () => {
    const unknown = await runIn(['check-config', 'staging']);
    expect(unknown.exit).toBe(2);
    expect(unknown.stderr).toContain(
      'error USAGE_ERROR: unknown stage "staging": check-config takes a stage name, one of uat, prod, prod-regions, or the path of a JSON stage file',
    );
    const misspelt = await runIn(['check-config', 'prdo']);
    expect(misspelt.exit).toBe(2);
    expect(misspelt.stderr).toContain('unknown stage "prdo"; did you mean "prod"? check-config takes');
    const missing = await runIn(['check-config', join(dir, 'nope.json')]);
    expect(missing.exit).toBe(2);
    expect(missing.stderr).toContain('cannot read the stage file');
    const notJson = join(dir, 'broken.json');
    writeFileSync(notJson, '{ name: uat');
    const garbled = await runIn(['check-config', notJson]);
    expect(garbled.exit).toBe(2);
    expect(garbled.stderr).toContain(
      `the stage file ${notJson} is not JSON; check-config takes a stage name, one of uat, prod, prod-regions, or the path of a JSON stage file`,
    );
  });

  it('given the local broker’s configuration, says what it is in one error, not a screenful (exit 2)', async () => {
    const local = await runIn(['check-config', 'local/broker.config.json']);
    expect(local).toMatchObject({ exit: 2, stdout: '' });
    expect(local.stderr.trim().split('\n')).toHaveLength(1);
    expect(local.stderr).toContain(
      "local/broker.config.json is the local broker's configuration (npm start), not a stage; check-config takes a stage name, one of uat, prod, prod-regions, or the path of a JSON stage file.",
    );
  });

  it('given a stage’s TypeScript file, says it takes the stage’s name and which one (exit 2)', async () => {
    const source = await runIn(['check-config', 'infra/stages/uat.ts']);
    expect(source).toMatchObject({ exit: 2, stdout: '' });
    expect(source.stderr.trimEnd().split('\n').at(-1)).toBe(
      'token-broker check-config: error USAGE_ERROR: check-config takes a stage name, one of uat, prod, prod-regions, or the path of a JSON stage file, not infra/stages/uat.ts: did you mean "token-broker check-config uat"? (see "token-broker check-config --help")',
    );
    const put = await runIn(['put-credentials', 'uat-advisor', '--stage', './infra/stages/prod-regions.ts']);
    expect(put.exit).toBe(2);
    expect(put.stderr).toContain('not ./infra/stages/prod-regions.ts: did you mean "--stage prod-regions"?');
  });
});
