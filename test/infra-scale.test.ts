import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBrokerApp } from '../infra/broker-app.js';
import { functionConfigDocuments, parseStageConfig } from '../infra/stage-config.js';
import { generateStage } from '../infra/tools/generate-stage.js';
import { brokerConfigText, configRevision } from '../shared/config/broker-config.js';
import { AccessPolicy } from '../shared/vend/access-policy.js';
import { loadVendConfig } from '../shared/vend/vend-config.js';
import { runIn } from './support/cli-harness.js';
import { writeConfigDocument } from './support/config-document.js';
import { SKIP_BUNDLING } from './support/infra-template.js';

/**
 * A whole company on one stage: 500 consumers in 10 accounts over 100 credential sets (generated), through
 * check-config, the synth (cdk-nag included) and the vend function's own configuration loading.
 */
const CONSUMERS = 500;
const SETS = 100;
const ACCOUNTS = 10;
const dir = mkdtempSync(path.join(tmpdir(), 'infra-scale-'));
const stageInput = generateStage({ consumers: CONSUMERS, sets: SETS, accounts: ACCOUNTS });
const stageFile = path.join(dir, 'stage.json');
writeFileSync(stageFile, JSON.stringify(stageInput));

interface Resource {
  Type: string;
  Properties: Record<string, unknown>;
}
let template: { Resources: Record<string, Resource> };
let templateBytes = 0;

beforeAll(() => {
  // The stage from its JSON file, as `cdk synth -c stageFile=…` reads it.
  const { app } = createBrokerApp({
    context: { ...SKIP_BUNDLING, stageFile },
    outdir: path.join(dir, 'out'),
  });
  const stack = app.synth().getStackByName('TokenBroker-scale');
  template = stack.template;
  templateBytes = JSON.stringify(stack.template).length;
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe(`a stage of ${CONSUMERS} consumers and ${SETS} credential sets`, () => {
  it('passes check-config, which reports the configuration document and the accounts the URL is granted to', async () => {
    const run = await runIn(['check-config', stageFile]);
    expect(run.exit, run.stderr).toBe(0);
    expect(run.stdout).toContain(`credential sets (${SETS}):`);
    expect(run.stdout).toContain(`consumers (${CONSUMERS}):`);
    expect(run.stdout).toMatch(/configuration document of the vend function: \d+ bytes \(at most 1048576\)/);
    expect(run.stdout).toContain(`(${ACCOUNTS} of at most 20 without urlAccess.organizationId)`);
  });

  it("synthesizes within CloudFormation's limits: 500 resources, a 1 MB template", () => {
    const count = Object.keys(template.Resources).length;
    console.info(
      `${CONSUMERS} consumers, ${SETS} sets: ${count} resources, ${templateBytes} bytes of template`,
    );
    expect(count).toBeLessThanOrEqual(500);
    expect(templateBytes).toBeLessThan(1_000_000);
  });

  it('grants the Function URL per account, two statements each, and names no consumer in the template', () => {
    const permissions = Object.values(template.Resources)
      .filter((r) => r.Type === 'AWS::Lambda::Permission')
      .map((r) => r.Properties);
    const url = permissions.filter((p) => p.Action === 'lambda:InvokeFunctionUrl');
    const viaUrl = permissions.filter((p) => p.InvokedViaFunctionUrl === true);
    expect(url).toHaveLength(ACCOUNTS);
    expect(viaUrl).toHaveLength(ACCOUNTS);
    expect(new Set(url.map((p) => p.Principal))).toEqual(
      new Set(stageInput.consumers.map((c) => c.principalArn.split(':')[4])),
    );
    const text = JSON.stringify(template);
    for (const consumer of stageInput.consumers) expect(text).not.toContain(consumer.principalArn);
  });

  it('hands the vend function a document its cold start loads, whose rules admit each consumer to its sets only', () => {
    const document = functionConfigDocuments(parseStageConfig(stageInput)).vend;
    const { file, remove } = writeConfigDocument(document);
    let config: ReturnType<typeof loadVendConfig>;
    try {
      config = loadVendConfig({
        BROKER_CONFIG_FILE: file,
        BROKER_CONFIG_REVISION: configRevision(brokerConfigText(document)),
        TOKENS_TABLE_NAME: 't',
        LEDGER_TABLE_NAME: 'l',
        REFRESHER_FUNCTION_NAME: 'r',
      });
    } finally {
      remove();
    }
    expect(config.consumers).toHaveLength(CONSUMERS);
    expect(config.sets).toHaveLength(SETS);
    const policy = new AccessPolicy(config.sets, config.consumers, config.operators);
    for (const consumer of stageInput.consumers) {
      const [, , , , account, resource = ''] = consumer.principalArn.split(':');
      const caller = policy.identify(
        `arn:aws:sts::${account}:assumed-role/${resource.slice('role/'.length)}/s`,
        account,
      );
      for (const setId of consumer.credentialSets) expect(policy.authorize(caller, setId).id).toBe(setId);
      const other = config.sets.find((set) => !consumer.credentialSets.includes(set.id));
      expect(() => policy.authorize(caller, other?.id ?? '')).toThrow(
        `this caller may not use credential set "${other?.id}"`,
      );
    }
  });
});

describe('a stage whose consumers are in more accounts than the URL policy holds', () => {
  it('is granted to its organization: one pair of statements whatever the number of accounts', () => {
    const spread = generateStage({
      consumers: 200,
      sets: 10,
      accounts: 50,
      name: 'spread',
      organizationId: 'o-a1b2c3d4e5',
    });
    const { app } = createBrokerApp({
      stages: [spread],
      context: SKIP_BUNDLING,
      outdir: path.join(dir, 'org'),
    });
    const resources = Object.values(
      (app.synth().getStackByName('TokenBroker-spread').template as { Resources: Record<string, Resource> })
        .Resources,
    );
    const onUrl = resources
      .filter((r) => r.Type === 'AWS::Lambda::Permission')
      .map((r) => r.Properties)
      .filter((p) => p.Action === 'lambda:InvokeFunctionUrl' || p.InvokedViaFunctionUrl === true);
    expect(onUrl).toHaveLength(2);
    for (const permission of onUrl) {
      expect(permission.Principal).toBe('*');
      expect(permission.PrincipalOrgID).toBe('o-a1b2c3d4e5');
    }
  });
});
