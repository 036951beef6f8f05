import { readFileSync } from 'node:fs';
import { type App, type CfnElement, type Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { createBrokerApp } from '../infra/broker-app.js';
import type { BrokerStack } from '../infra/broker-stack.js';
import { globalTableName } from '../infra/global-stacks.js';
import { MRSC_REGION_SETS } from '../infra/mrsc-regions.js';
import { parsePipelineConfig } from '../infra/pipeline-config.js';
import type { RegionStacks } from '../infra/regions-app.js';
import { secretResourcePolicy } from '../infra/secret-policy.js';
import { servingStacks } from '../infra/stack-names.js';
import {
  functionConfigDocuments,
  parseStageConfig,
  type StageConfig,
  type StageInput,
} from '../infra/stage-config.js';
import { pipeline } from '../infra/stages/pipeline.js';
import { prodRegions } from '../infra/stages/prod-regions.js';
import { uat } from '../infra/stages/uat.js';
import { optionalTableName } from '../shared/config/env.js';
import { ConfigurationError } from '../shared/errors.js';
import { LEARNED_TABLE_ENV } from '../shared/ledger/learned-store.js';
import { METRICS_NAMESPACE, Metric, SERVICE_NAME } from '../shared/metric-names.js';
import { LEDGER_REGIONAL_ENV, loadVendConfig } from '../shared/vend/vend-config.js';
import { writeConfigDocument } from './support/config-document.js';
import {
  actionsOf,
  identityStatements,
  type Json,
  refOf,
  resolveArn,
  resourcesOf,
  SKIP_BUNDLING,
  type Statement,
  wildcardGrants,
} from './support/infra-template.js';
import { stageFailureOf, variant } from './support/stage-variants.js';

/**
 * A two-Region stage (`regions: { home, peer, witness }`, docs/deploying.md, Two Regions), synthesized offline:
 * the option's validation, the five stacks, the MRSC table, the multi-Region key and the replicated secrets,
 * and in both serving stacks the lease renewer's least privilege and the checks the one-Region stages have
 * (no wildcard grants, alarms to the topic with runbook links, log retention, IAM-only URL, cdk-nag).
 */

const withRegions = (regions: unknown): StageInput =>
  variant(prodRegions, (s) => Object.assign(s, { regions }));
const { home, peer, witness } = prodRegions.regions;

describe('the regions option', () => {
  it('is optional: a stage without it is one Region, as before', () => {
    expect(parseStageConfig(uat).regions).toBeUndefined();
    expect(parseStageConfig(prodRegions).regions).toEqual({ home, peer, witness });
  });

  it('accepts every MRSC Region set, home being the stage Region', () => {
    for (const [first, second, third] of Object.values(MRSC_REGION_SETS)) {
      const stage = variant(prodRegions, (s) =>
        Object.assign(s, { region: first, regions: { home: first, peer: second, witness: third } }),
      );
      expect(parseStageConfig(stage).regions?.witness).toBe(third);
    }
  });

  const cases: [string, unknown, string][] = [
    [
      'a witness in no MRSC Region set',
      { home, peer, witness: 'us-west-1' },
      'prod-regions.regions.witness: "us-west-1" is in no DynamoDB multi-Region strong consistency Region set',
    ],
    [
      'a peer of another Region set',
      { home, peer: 'us-east-1', witness },
      'prod-regions.regions.peer: "us-east-1" is in the US Region set, home "eu-west-1" in the EU set',
    ],
    [
      'a witness of another Region set',
      { home, peer, witness: 'ap-northeast-3' },
      'prod-regions.regions.witness: "ap-northeast-3" is in the AP Region set',
    ],
    [
      'a home other than the stage Region',
      { home: 'eu-west-3', peer, witness },
      `prod-regions.regions.home: must be the stage's own Region "eu-west-1"`,
    ],
    [
      'a peer equal to home',
      { home, peer: home, witness },
      'prod-regions.regions.peer: must differ from home',
    ],
    [
      'a witness equal to the peer',
      { home, peer, witness: peer },
      'prod-regions.regions.witness: must differ from home and peer',
    ],
    ['a missing witness', { home, peer }, 'prod-regions.regions.witness:'],
    [
      'an unknown key',
      { home, peer, witness, standby: 'eu-west-3' },
      'prod-regions.regions: unknown key `standby`',
    ],
  ];
  it.each(cases)('refuses %s, naming the key', (_, regions, message) => {
    expect(stageFailureOf(withRegions(regions)).message).toContain(message);
  });

  /** The stage with its first set's first consumer reserving 5 a minute, homed in `region`. */
  const reserving = (base: StageInput, region: string): StageInput =>
    variant(base, (stage) => {
      const set = stage.credentialSets[0] as (typeof stage.credentialSets)[number];
      const consumer = stage.consumers.find((c) => c.credentialSets.includes(set.id));
      set.rateLimits = {
        ...set.rateLimits,
        reservations: [{ consumer: consumer?.name ?? '', perWindow: { '60': 5 }, region }],
      };
    });

  it("homes a reservation in one of the stage's two Regions, and refuses any other", () => {
    const homed = parseStageConfig(reserving(prodRegions, peer));
    expect(homed.credentialSets[0]?.rateLimits.reservations?.[0]?.region).toBe(peer);
    expect(stageFailureOf(reserving(prodRegions, witness)).message).toContain(
      `credentialSets[0].rateLimits.reservations[0].region: "${witness}" is neither regions.home (${home}) nor regions.peer (${peer})`,
    );
    // A one-Region stage reserves in its one Region: a `region` there means nothing, and is refused.
    const { regions: _, ...oneRegion } = prodRegions;
    expect(stageFailureOf(reserving(oneRegion, home)).message).toContain(
      'credentialSets[0].rateLimits.reservations[0].region: only in a stage with `regions`',
    );
  });

  it('fails the synth with that message, before any stack is built', () => {
    const wrong = withRegions({ home, peer: 'us-east-2', witness });
    expect(() => createBrokerApp({ stages: [wrong], context: SKIP_BUNDLING })).toThrow(ConfigurationError);
    expect(() => createBrokerApp({ stages: [wrong], context: SKIP_BUNDLING })).toThrow(
      /prod-regions\.regions\.peer: "us-east-2" is in the US Region set/,
    );
  });

  it("refuses the peer's refresher role as a break-glass principal (it reads the secrets already)", () => {
    const peerRole = `arn:aws:iam::555555555555:role/token-broker-prod-regions-${peer}-refresher`;
    const stage = variant(prodRegions, (s) => Object.assign(s, { breakGlassPrincipals: [peerRole] }));
    expect(stageFailureOf(stage).message).toContain(
      'prod-regions.breakGlassPrincipals[0]: the refresher role reads the secrets already',
    );
  });

  it('is not deployed by the pipeline, which says so', () => {
    const stages = [parseStageConfig(uat), parseStageConfig({ ...prodRegions, name: 'prod' })];
    expect(() => parsePipelineConfig(pipeline, stages)).toThrow(
      'pipeline.prodStage: stage "prod" has regions: the pipeline deploys one-Region stages only',
    );
  });

  it("reads LEDGER_REGIONAL at the vend function's cold start: unset or false is one Region, a wrong value fails", () => {
    const { file, remove } = writeConfigDocument(functionConfigDocuments(parseStageConfig(uat)).vend);
    const env = {
      TOKENS_TABLE_NAME: 'tokens',
      LEDGER_TABLE_NAME: 'ledger',
      REFRESHER_FUNCTION_NAME: 'refresher',
      BROKER_CONFIG_FILE: file,
    };
    try {
      expect(loadVendConfig(env).ledgerRegional).toBe(false);
      expect(loadVendConfig({ ...env, [LEDGER_REGIONAL_ENV]: 'false' }).ledgerRegional).toBe(false);
      expect(loadVendConfig({ ...env, [LEDGER_REGIONAL_ENV]: 'true' }).ledgerRegional).toBe(true);
      expect(() => loadVendConfig({ ...env, [LEDGER_REGIONAL_ENV]: 'yes' })).toThrow(ConfigurationError);
      expect(() => loadVendConfig({ ...env, [LEDGER_REGIONAL_ENV]: 'yes' })).toThrow(
        'invalid configuration: environment variable LEDGER_REGIONAL must be "true" or "false", not "yes"',
      );
    } finally {
      remove();
    }
  });

  it("reads LEARNED_TABLE_NAME at the vend function's and the renewer's cold start: unset is the ledger table, a wrong value fails", () => {
    const { file, remove } = writeConfigDocument(functionConfigDocuments(parseStageConfig(uat)).vend);
    const env = {
      TOKENS_TABLE_NAME: 'tokens',
      LEDGER_TABLE_NAME: 'ledger',
      REFRESHER_FUNCTION_NAME: 'refresher',
      BROKER_CONFIG_FILE: file,
    };
    const global = globalTableName(parseStageConfig(prodRegions));
    const message = `invalid configuration: environment variable LEARNED_TABLE_NAME must be a DynamoDB table name (3 to 255 of A-Z, a-z, 0-9, _ - .), not "arn:aws:dynamodb:eu-west-1:555555555555:table/${global}"`;
    const wrong = { [LEARNED_TABLE_ENV]: `arn:aws:dynamodb:eu-west-1:555555555555:table/${global}` };
    try {
      expect(loadVendConfig(env).learnedTableName).toBeUndefined();
      expect(loadVendConfig({ ...env, [LEARNED_TABLE_ENV]: ' ' }).learnedTableName).toBeUndefined();
      expect(loadVendConfig({ ...env, [LEARNED_TABLE_ENV]: global }).learnedTableName).toBe(global);
      expect(() => loadVendConfig({ ...env, ...wrong })).toThrow(ConfigurationError);
      expect(() => loadVendConfig({ ...env, ...wrong })).toThrow(message);
      // The renewer's cold start (functions/lease-renewer.ts) reads it the same way.
      expect(optionalTableName({}, LEARNED_TABLE_ENV)).toBeUndefined();
      expect(optionalTableName({ [LEARNED_TABLE_ENV]: global }, LEARNED_TABLE_ENV)).toBe(global);
      expect(() => optionalTableName(wrong, LEARNED_TABLE_ENV)).toThrow(message);
    } finally {
      remove();
    }
  });

  it('is built only when named: the default synth is the one-Region stages', () => {
    const { stacks, regions } = createBrokerApp({ context: SKIP_BUNDLING });
    expect(stacks.map((s) => s.stackName)).toEqual(['TokenBroker-uat', 'TokenBroker-prod']);
    expect(regions).toEqual([]);
  });
});

let app: App;
let built: RegionStacks;
let stage: StageConfig;
const templates = new Map<Stack, Template>();
const templateOf = (stack: Stack): Template => {
  const found = templates.get(stack) ?? Template.fromStack(stack);
  templates.set(stack, found);
  return found;
};
const resources = (stack: Stack, type: string): Json[] =>
  Object.values(templateOf(stack).findResources(type)).map((r) => r.Properties as Json);

beforeAll(() => {
  const result = createBrokerApp({ context: { ...SKIP_BUNDLING, stage: 'prod-regions' } });
  app = result.app;
  const [only] = result.regions ?? [];
  if (!only) throw new Error('no two-Region stage was built');
  built = only;
  stage = parseStageConfig(prodRegions);
});

/** Fn::GetStackOutput of another stack (the project's weak cross-stack references, cdk.json). */
const stackOutput = (value: unknown) =>
  (value as { 'Fn::GetStackOutput'?: { StackName: string; Region: string } })['Fn::GetStackOutput'];

describe('the stacks of a two-Region stage', () => {
  it('are five, in their Regions, protected in production, deployed key → replica → table → serving', () => {
    const { key, keyReplica, global, home: h, peer: p } = built;
    expect([key, keyReplica, global, h, p].map((s) => [s.stackName, s.account, s.region])).toEqual([
      ['TokenBroker-prod-regions-key', '555555555555', home],
      ['TokenBroker-prod-regions-key-replica', '555555555555', peer],
      ['TokenBroker-prod-regions-global', '555555555555', home],
      ['TokenBroker-prod-regions', '555555555555', home],
      [`TokenBroker-prod-regions-${peer}`, '555555555555', peer],
    ]);
    for (const s of [key, keyReplica, global, h, p]) expect(s.terminationProtection, s.stackName).toBe(true);
    const dependsOn = (s: Stack) => s.dependencies.map((d) => d.stackName).sort();
    expect(dependsOn(keyReplica)).toEqual([key.stackName]);
    expect(dependsOn(global)).toEqual([key.stackName, keyReplica.stackName].sort());
    expect(dependsOn(h)).toEqual([key.stackName, global.stackName].sort());
    expect(dependsOn(p)).toEqual([keyReplica.stackName, global.stackName].sort());
  });

  it("names its serving stacks and Regions as the CLI does, each with its Region's VendUrl output", () => {
    const synthesized = [built.home, built.peer].map((s) => ({
      stackName: s.stackName,
      region: s.region,
      vendUrl: Object.keys((templateOf(s).toJSON().Outputs ?? {}) as Json).includes('VendUrl'),
    }));
    expect(synthesized).toEqual(
      servingStacks(stage).map(({ stackName, region }) => ({ stackName, region, vendUrl: true })),
    );
    expect(servingStacks(stage).map((s) => s.role)).toEqual(['home', 'peer']);
  });

  it('has a rotating multi-Region key in home, kept in production, and its replica in the peer', () => {
    const [key] = resources(built.key, 'AWS::KMS::Key');
    expect(key).toMatchObject({ MultiRegion: true, EnableKeyRotation: true, PendingWindowInDays: 30 });
    expect(Object.values(templateOf(built.key).findResources('AWS::KMS::Key'))[0]?.DeletionPolicy).toBe(
      'Retain',
    );
    const [replica] = resources(built.keyReplica, 'AWS::KMS::ReplicaKey');
    expect(stackOutput(replica?.PrimaryKeyArn)).toMatchObject({
      StackName: built.key.stackName,
      Region: home,
    });
    expect(resources(built.keyReplica, 'AWS::KMS::Key')).toEqual([]);
  });

  it('has one MRSC table: STRONG, replicas in home and peer, the witness, the key per Region, no TTL', () => {
    const tables = resources(built.global, 'AWS::DynamoDB::GlobalTable');
    expect(tables).toHaveLength(1);
    const [table] = tables as (Json & { Replicas: Json[] })[];
    expect(table).toMatchObject({
      TableName: globalTableName(stage),
      MultiRegionConsistency: 'STRONG',
      GlobalTableWitnesses: [{ Region: witness }],
      KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
      SSESpecification: { SSEEnabled: true, SSEType: 'KMS' },
    });
    // MRSC has no TTL: a TimeToLiveSpecification would fail the create.
    expect(table?.TimeToLiveSpecification).toBeUndefined();
    const byRegion: Record<string, Json> = Object.fromEntries(
      (table?.Replicas ?? []).map((r) => [String(r.Region), r]),
    );
    expect(Object.keys(byRegion).sort()).toEqual([home, peer].sort());
    for (const replica of Object.values(byRegion)) expect(replica.DeletionProtectionEnabled).toBe(true);
    const sseKeyOf = (region: string) =>
      (byRegion[region]?.SSESpecification as Json | undefined)?.KMSMasterKeyId;
    const homeKey = sseKeyOf(home);
    expect(stackOutput(homeKey)).toMatchObject({ StackName: built.key.stackName, Region: home });
    // The replica's key: the primary's key id in the peer's Region (a replica shares its primary's id).
    const peerKey = resolveArn(sseKeyOf(peer));
    expect(peerKey).toMatch(new RegExp(`^arn:aws:kms:${peer}:555555555555:key/<.*PublishOutputRef`));
  });

  it('creates each secret once, under the key, replicated to the peer under the replica key, value-less', () => {
    const secrets = resources(built.global, 'AWS::SecretsManager::Secret');
    const names = [...new Set(stage.credentialSets.map((s) => s.secretName))];
    expect(secrets.map((s) => s.Name).sort()).toEqual(names.sort());
    for (const secret of secrets) {
      expect(stackOutput(secret.KmsKeyId)).toMatchObject({ StackName: built.key.stackName, Region: home });
      const replicas = secret.ReplicaRegions as { Region: string; KmsKeyId: unknown }[];
      expect(replicas.map((r) => r.Region)).toEqual([peer]);
      expect(resolveArn(replicas[0]?.KmsKeyId)).toMatch(new RegExp(`^arn:aws:kms:${peer}:555555555555:key/`));
      // No value in the template: a placeholder without a username until put-credentials writes one.
      expect(secret.SecretString).toBeUndefined();
      expect(JSON.stringify(secret.GenerateSecretString)).not.toMatch(/username|password/);
    }
    const text = JSON.stringify(templateOf(built.global).toJSON());
    expect(text).not.toContain('{{resolve:secretsmanager');
  });

  it("puts on each secret the policy put-credentials puts: both Regions' refreshers and break-glass read", () => {
    const policies = resources(built.global, 'AWS::SecretsManager::ResourcePolicy');
    const secretIds = Object.keys(templateOf(built.global).findResources('AWS::SecretsManager::Secret'));
    expect(policies.map((p) => refOf(p.SecretId)).sort()).toEqual(secretIds.sort());
    for (const policy of policies) {
      expect(policy.BlockPublicPolicy).toBe(true);
      expect(policy.ResourcePolicy).toEqual(secretResourcePolicy(stage));
    }
    const readers = JSON.stringify(secretResourcePolicy(stage));
    expect(readers).toContain(':role/token-broker-prod-regions-refresher"');
    expect(readers).toContain(`:role/token-broker-prod-regions-${peer}-refresher"`);
  });
});

const markdownAnchors = (markdown: string): Set<string> =>
  new Set(
    [...markdown.matchAll(/^#{1,6} (.+)$/gm)].map(([, heading]) =>
      (heading ?? '')
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N} -]/gu, '')
        .replace(/ /g, '-'),
    ),
  );

describe.each(['home', 'peer'] as const)('the %s serving stack', (which) => {
  const stack = (): BrokerStack => built[which];
  const own = which === 'home' ? home : peer;
  const other = which === 'home' ? peer : home;
  const idOf = (...path: string[]) => {
    const s = stack();
    let node = s.node.findChild(path[0] ?? '');
    for (const part of path.slice(1)) node = node.node.findChild(part);
    return s.getLogicalId(node.node.defaultChild as CfnElement);
  };
  const statementsOf = (role: string) =>
    identityStatements(templateOf(stack()))
      .filter(({ roles }) => roles.includes(role))
      .map(({ statement }) => statement as Statement & { Condition?: unknown });
  const ownLedger = () => idOf('Tables', 'Ledger');
  const ownKey = () => idOf('Tables', 'Key');
  /** The multi-Region key as this Region has it: the primary's ARN in home, the replica's in the peer. */
  const globalKeyOutput = () => (which === 'home' ? built.key.stackName : built.keyReplica.stackName);

  it('has every resource of the same stage in one Region, under the same logical ids, and only the renewer more', () => {
    const oneRegion = variant(prodRegions, (s) => Object.assign(s, { regions: undefined }));
    const [alone] = createBrokerApp({ stages: [oneRegion], context: SKIP_BUNDLING }).stacks;
    // Ids that hash what differs by design (the version's function properties; the event permission's path,
    // which holds the stack's name), as test/infra-pipeline.test.ts normalises them.
    const normalised = (id: string) =>
      id
        .replace(/^VendCurrentVersion[0-9a-f]{40}$/, 'VendCurrentVersion<hash>')
        .replace(/^ScheduleRuleAllowEventRule\w+$/, 'ScheduleRuleAllowEventRule<path>');
    const typesOf = (t: Template) =>
      Object.fromEntries(
        Object.entries(t.toJSON().Resources as Record<string, Json>).map(([id, r]) => [
          normalised(id),
          r.Type,
        ]),
      );
    const expected = typesOf(templateOf(alone as Stack));
    const actual = typesOf(templateOf(stack()));
    const added = Object.keys(actual).filter((id) => !(id in expected));
    expect(Object.keys(expected).filter((id) => !(id in actual))).toEqual([]);
    for (const id of Object.keys(expected)) expect(actual[id], id).toBe(expected[id]);
    // What the second Region adds: the renewer (function, role, policy, logs, schedule, its permission, alarms).
    expect(added.length).toBeGreaterThan(0);
    for (const id of added) expect(id, String(actual[id])).toMatch(/^LeaseRenewer/);
    // The same stage in one Region keeps its tokens in its own table, and its ledger as before.
    const aloneJson = templateOf(alone as Stack).toJSON();
    const vendEnv = aloneJson.Resources[idOf('Vend')].Properties.Environment.Variables;
    expect(vendEnv.TOKENS_TABLE_NAME).toEqual({ Ref: idOf('Tables', 'Tokens') });
    expect(vendEnv[LEDGER_REGIONAL_ENV]).toBeUndefined();
    // And its learned limits in its ledger table: no LEARNED_TABLE_NAME.
    expect(vendEnv[LEARNED_TABLE_ENV]).toBeUndefined();
    // And watches them there: its tokens-table alarms name its own table (as every one-Region stage's do).
    const aloneAlarm = Object.values(aloneJson.Resources as Record<string, Json>).find(
      (r) =>
        r.Type === 'AWS::CloudWatch::Alarm' &&
        String((r.Properties as Json).AlarmName).endsWith('-tokens-table-throttles'),
    );
    expect(JSON.stringify(aloneAlarm)).toContain(
      `{"Name":"TableName","Value":{"Ref":"${idOf('Tables', 'Tokens')}"}}`,
    );
  });

  it('is the broker of one Region: its own ledger and (kept, unused) tokens tables and key, the vend URL with AWS_IAM', () => {
    const t = templateOf(stack());
    expect(Object.keys(t.findResources('AWS::DynamoDB::Table'))).toHaveLength(2);
    expect(Object.keys(t.findResources('AWS::KMS::Key'))).toEqual([ownKey()]);
    expect(resources(stack(), 'AWS::Lambda::Url').map((u) => u.AuthType)).toEqual(['AWS_IAM']);
    const role = resources(stack(), 'AWS::IAM::Role').find((r) => r.RoleName !== undefined);
    expect(role?.RoleName).toBe(
      which === 'home'
        ? 'token-broker-prod-regions-refresher'
        : `token-broker-prod-regions-${peer}-refresher`,
    );
  });

  it('runs the lease renewer every minute, naming both tables and both Regions', () => {
    const fn = templateOf(stack()).toJSON().Resources[idOf('LeaseRenewer', 'Function')].Properties;
    expect(fn).toMatchObject({ Handler: 'index.handler', Runtime: 'nodejs24.x', Architectures: ['arm64'] });
    expect(fn.Environment.Variables).toMatchObject({
      LEDGER_TABLE_NAME: { Ref: ownLedger() },
      LEASE_TABLE_NAME: globalTableName(stage),
      TOKENS_TABLE_NAME: globalTableName(stage),
      [LEARNED_TABLE_ENV]: globalTableName(stage),
      OWN_REGION: own,
      OTHER_REGION: other,
    });
    const rules = resources(stack(), 'AWS::Events::Rule') as (Json & { Targets: Json[] })[];
    const renewerRules = rules.filter((r) =>
      r.Targets.some((t) => refOf(t.Arn) === idOf('LeaseRenewer', 'Function')),
    );
    expect(renewerRules.map((r) => r.ScheduleExpression)).toEqual(['rate(1 minute)']);
    expect(renewerRules[0]?.State).toBe('ENABLED');
  });

  it("gives the renewer exactly its ledger's read and share write, the token and learned items' read and the lease items of the MRSC table", () => {
    const statements = statementsOf(idOf('LeaseRenewer', 'FunctionRole'));
    const summary = statements.map((s) => ({
      actions: actionsOf(s).sort(),
      resources: resourcesOf(s).map((r) => refOf(r) ?? stackOutput(r)?.StackName ?? resolveArn(r)),
      condition: s.Condition,
    }));
    expect(summary).toEqual(
      expect.arrayContaining([
        {
          actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
          resources: [ownLedger()],
          condition: undefined,
        },
        {
          actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
          resources: [`arn:aws:dynamodb:${own}:555555555555:table/${globalTableName(stage)}`],
          condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['lease#*'] } },
        },
        // Which tokens' ledger keys to lease: the token items, read only.
        {
          actions: ['dynamodb:GetItem'],
          resources: [`arn:aws:dynamodb:${own}:555555555555:table/${globalTableName(stage)}`],
          condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['set#*'] } },
        },
        // Which rings to lease: the learned items both Regions' vend functions keep there, read only.
        {
          actions: ['dynamodb:GetItem'],
          resources: [`arn:aws:dynamodb:${own}:555555555555:table/${globalTableName(stage)}`],
          condition: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['learned#*'] } },
        },
        {
          actions: ['kms:Decrypt'],
          resources: [ownKey(), globalKeyOutput()],
          condition: { StringEquals: { 'kms:ViaService': `dynamodb.${own}.amazonaws.com` } },
        },
      ]),
    );
    // And nothing else but writing its own logs.
    expect(summary).toHaveLength(6);
    expect(summary.find((s) => s.actions.every((a) => a.startsWith('logs:')))?.resources).toEqual([
      idOf('LeaseRenewer', 'FunctionLogs'),
    ]);
  });

  it("lets the refresher read the stage's secrets in its own Region, decrypting through Secrets Manager only", () => {
    const statements = statementsOf(idOf('RefresherRole'));
    const secrets = statements.filter((s) => actionsOf(s).some((a) => a.startsWith('secretsmanager:')));
    expect(secrets.map(actionsOf)).toEqual([['secretsmanager:GetSecretValue']]);
    expect(
      resourcesOf(secrets[0] as Statement)
        .map(resolveArn)
        .sort(),
    ).toEqual(
      stage.credentialSets
        .map((set) => `arn:aws:secretsmanager:${own}:555555555555:secret:${set.secretName}-??????`)
        .sort(),
    );
    const viaSecrets = statements.filter((s) =>
      JSON.stringify(s.Condition ?? {}).includes('secretsmanager.'),
    );
    expect(
      viaSecrets.map((s) => [
        actionsOf(s),
        resourcesOf(s).map((r) => stackOutput(r)?.StackName),
        s.Condition,
      ]),
    ).toEqual([
      [
        ['kms:Decrypt'],
        [globalKeyOutput()],
        { StringEquals: { 'kms:ViaService': `secretsmanager.${own}.amazonaws.com` } },
      ],
    ]);
    // The vend function never touches the secrets (its MRSC access: below).
    const vend = statementsOf(idOf('VendRole'));
    expect(vend.flatMap(actionsOf).filter((a) => a.startsWith('secretsmanager:'))).toEqual([]);
  });

  /** A role's statements, logs apart, with each resource by its logical id, producing stack, or ARN. */
  const grantsOf = (role: string) =>
    statementsOf(role)
      .filter((s) => !actionsOf(s).every((a) => a.startsWith('logs:')))
      .map((s) => ({
        actions: actionsOf(s).sort(),
        resources: resourcesOf(s)
          .map((r) => refOf(r) ?? stackOutput(r)?.StackName ?? resolveArn(r))
          .sort(),
        condition: s.Condition,
      }));
  const globalTableArn = () => `arn:aws:dynamodb:${own}:555555555555:table/${globalTableName(stage)}`;
  const setItemsOnly = { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['set#*'] } };
  const viaDynamoDb = { StringEquals: { 'kms:ViaService': `dynamodb.${own}.amazonaws.com` } };

  it('gives the refresher exactly the set items of the MRSC table (one login per set for both Regions), no ledger', () => {
    const grants = grantsOf(idOf('RefresherRole'));
    const secretArns = stage.credentialSets
      .map((set) => `arn:aws:secretsmanager:${own}:555555555555:secret:${set.secretName}-??????`)
      .sort();
    expect(
      grants.map((g) => (g.actions[0] === 'secretsmanager:GetSecretValue' ? { ...g, resources: [] } : g)),
    ).toEqual([
      {
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        resources: [globalTableArn()],
        condition: setItemsOnly,
      },
      { actions: ['kms:Decrypt'], resources: [globalKeyOutput()], condition: viaDynamoDb },
      { actions: ['secretsmanager:GetSecretValue'], resources: [], condition: undefined },
      {
        actions: ['kms:Decrypt'],
        resources: [globalKeyOutput()],
        condition: { StringEquals: { 'kms:ViaService': `secretsmanager.${own}.amazonaws.com` } },
      },
    ]);
    const secretGrant = statementsOf(idOf('RefresherRole')).find((s) =>
      actionsOf(s).includes('secretsmanager:GetSecretValue'),
    );
    expect(
      resourcesOf(secretGrant as Statement)
        .map(resolveArn)
        .sort(),
    ).toEqual(secretArns);
    // Nothing of the Region's own tables: not the tokens table (kept, empty), not the ledger.
    const text = JSON.stringify(statementsOf(idOf('RefresherRole')));
    for (const id of [idOf('Tables', 'Tokens'), ownLedger(), ownKey()]) expect(text).not.toContain(id);
  });

  it("gives the vend function the MRSC table's set items to read and its learned items, and its own Region's ledger", () => {
    const grants = grantsOf(idOf('VendRole'));
    const learnedItemsOnly = { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['learned#*'] } };
    expect(grants).toEqual([
      { actions: ['dynamodb:GetItem'], resources: [globalTableArn()], condition: setItemsOnly },
      // Both keys through DynamoDB in this Region (one statement: CDK merges alike statements).
      { actions: ['kms:Decrypt'], resources: [ownKey(), globalKeyOutput()].sort(), condition: viaDynamoDb },
      {
        actions: ['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:UpdateItem'],
        resources: [ownLedger()],
        condition: undefined,
      },
      // The learned items of the Region's ledger, kept for the version before `regions` during its deploy.
      { actions: ['dynamodb:PutItem'], resources: [ownLedger()], condition: learnedItemsOnly },
      // The learned items both Regions learn into and lease: read, and written whole on their version.
      {
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem'],
        resources: [globalTableArn()],
        condition: learnedItemsOnly,
      },
      { actions: ['lambda:InvokeFunction'], resources: [idOf('Refresher')], condition: undefined },
    ]);
    expect(JSON.stringify(statementsOf(idOf('VendRole')))).not.toContain(idOf('Tables', 'Tokens'));
  });

  it("names the MRSC table as both functions' token table and the vend function's learned table, and makes its ledger regional", () => {
    const env = (id: string) =>
      templateOf(stack()).toJSON().Resources[id].Properties.Environment.Variables as Json;
    const refresher = env(idOf('Refresher'));
    const vend = env(idOf('Vend'));
    expect(refresher.TOKENS_TABLE_NAME).toBe(globalTableName(stage));
    expect(refresher.LEDGER_TABLE_NAME).toBeUndefined();
    expect(refresher[LEDGER_REGIONAL_ENV]).toBeUndefined();
    expect(vend).toMatchObject({
      TOKENS_TABLE_NAME: globalTableName(stage),
      LEDGER_TABLE_NAME: { Ref: ownLedger() },
      [LEDGER_REGIONAL_ENV]: 'true',
      [LEARNED_TABLE_ENV]: globalTableName(stage),
    });
    // As the vend function reads it at cold start.
    const { file, remove } = writeConfigDocument(functionConfigDocuments(stage).vend);
    try {
      const config = loadVendConfig({
        ...(vend as Record<string, string>),
        LEDGER_TABLE_NAME: 'ledger',
        REFRESHER_FUNCTION_NAME: 'refresher',
        BROKER_CONFIG_FILE: file,
      });
      expect(config).toMatchObject({
        tokensTableName: globalTableName(stage),
        ledgerRegional: true,
        learnedTableName: globalTableName(stage),
      });
    } finally {
      remove();
    }
    const outputs = templateOf(stack()).toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs.TokensTableName?.Value).toBe(globalTableName(stage));
  });

  it('has no IAM statement with Resource "*" for Secrets Manager, DynamoDB or KMS actions', () => {
    expect(identityStatements(templateOf(stack())).length).toBeGreaterThan(0);
    expect(wildcardGrants(templateOf(stack()), ['secretsmanager', 'dynamodb', 'kms'])).toEqual([]);
  });

  it('names its alarms and dashboard after itself, each alarm to the topic with an existing runbook section', () => {
    const anchors = markdownAnchors(readFileSync(new URL('../docs/runbook.md', import.meta.url), 'utf8'));
    const topics = Object.keys(templateOf(stack()).findResources('AWS::SNS::Topic'));
    expect(topics).toHaveLength(1);
    const alarms = resources(stack(), 'AWS::CloudWatch::Alarm') as (Json & {
      AlarmName: string;
      AlarmDescription: string;
    })[];
    const names = alarms.map((a) => a.AlarmName);
    for (const suffix of [
      'lease-renewer-errors',
      'lease-renewer-throttles',
      'lease-renewals-refused',
      'lease-renewals-failing',
      'tokens-table-throttles',
      'tokens-table-system-errors',
    ]) {
      expect(names).toContain(`${stack().stackName}-${suffix}`);
    }
    for (const alarm of alarms) {
      expect(alarm.AlarmName.startsWith(`${stack().stackName}-`), alarm.AlarmName).toBe(true);
      const [, url, link] = /Runbook: (https:\/\/\S+)#([a-z0-9-]+)$/.exec(alarm.AlarmDescription) ?? [];
      expect(url, alarm.AlarmName).toBe(stage.runbookUrl);
      expect(anchors.has(link ?? ''), `${alarm.AlarmName} → #${link}`).toBe(true);
      expect(alarm.AlarmActions).toEqual([{ Ref: topics[0] }]);
      expect(alarm.OKActions).toEqual([{ Ref: topics[0] }]);
    }
    const dashboards = resources(stack(), 'AWS::CloudWatch::Dashboard').map((d) => d.DashboardName);
    expect(dashboards).toEqual([stack().stackName]);
  });

  /** Each alarm's name and the tables its metrics name (TableName dimensions: a name, or a table's logical id). */
  const alarmTables = () =>
    (resources(stack(), 'AWS::CloudWatch::Alarm') as (Json & { AlarmName: string; Metrics?: Json[] })[]).map(
      (alarm) => ({
        name: alarm.AlarmName.slice(stack().stackName.length + 1),
        metrics: (alarm.Metrics ?? []).flatMap((m) => {
          const metric = (m.MetricStat as { Metric?: Json } | undefined)?.Metric;
          return metric ? [metric] : [];
        }),
        description: String(alarm.AlarmDescription),
      }),
    );
  const tablesOf = (metrics: Json[]) => [
    ...new Set(
      metrics.flatMap((m) =>
        ((m.Dimensions ?? []) as { Name: string; Value: unknown }[])
          .filter((d) => d.Name === 'TableName')
          .map((d) => refOf(d.Value) ?? String(d.Value)),
      ),
    ),
  ];

  it("watches the tokens where they are: the tokens table's alarms on the MRSC table in this Region, once", () => {
    const watched = alarmTables().filter((a) => a.name.includes('-table-'));
    expect(
      watched.map((a) => [a.name, tablesOf(a.metrics), a.metrics.map((m) => m.MetricName).sort()]),
    ).toEqual([
      ['tokens-table-throttles', [globalTableName(stage)], ['ReadThrottleEvents', 'WriteThrottleEvents']],
      ['tokens-table-system-errors', [globalTableName(stage)], Array(5).fill('SystemErrors')],
      ['ledger-table-throttles', [ownLedger()], ['ReadThrottleEvents', 'WriteThrottleEvents']],
      ['ledger-table-system-errors', [ownLedger()], Array(5).fill('SystemErrors')],
    ]);
    // Every operation sent to the MRSC table (the tokens' GetItem and UpdateItem, the leases' PutItem too).
    const systemErrors = watched.find((a) => a.name === 'tokens-table-system-errors');
    const operations = (systemErrors?.metrics ?? []).map(
      (m) => (m.Dimensions as { Name: string; Value: string }[]).find((d) => d.Name === 'Operation')?.Value,
    );
    expect(operations.sort()).toEqual(['DeleteItem', 'GetItem', 'PutItem', 'Query', 'UpdateItem']);
    expect(systemErrors?.description).toContain(`the two-Region table ${globalTableName(stage)} in ${own}`);
    // Nothing watches the stack's own tokens table (kept, empty), and no two alarms watch the same table.
    const all = alarmTables().flatMap((a) => tablesOf(a.metrics).map((table) => [a.name, table]));
    expect(all.filter(([, table]) => table === idOf('Tables', 'Tokens'))).toEqual([]);
    expect(all.filter(([, table]) => table === globalTableName(stage)).map(([name]) => name)).toEqual([
      'tokens-table-throttles',
      'tokens-table-system-errors',
    ]);
  });

  it("draws the MRSC table's capacity and throttles on the dashboard, not the empty tokens table's", () => {
    const [dashboard] = resources(stack(), 'AWS::CloudWatch::Dashboard');
    const body = JSON.stringify(dashboard?.DashboardBody);
    expect(body).toContain(`tokens table (the two-Region table ${globalTableName(stage)} in ${own}`);
    expect(body).toContain(`\\"TableName\\",\\"${globalTableName(stage)}\\"`);
    expect(body).not.toContain(idOf('Tables', 'Tokens'));
  });

  it("alarms when the renewer's renewals are refused or fail three minutes in a row, on the metrics it counts itself", () => {
    const alarms = resources(stack(), 'AWS::CloudWatch::Alarm') as (Json & {
      AlarmName: string;
      MetricName?: string;
      Namespace?: string;
      Dimensions?: { Name: string; Value: string }[];
      EvaluationPeriods: number;
      DatapointsToAlarm: number;
      Period?: number;
      Statistic?: string;
      Threshold: number;
      TreatMissingData: string;
    })[];
    for (const [suffix, metric] of [
      ['lease-renewals-refused', Metric.LeaseRenewalRefused],
      ['lease-renewals-failing', Metric.LeaseRenewalFailed],
    ] as const) {
      const alarm = alarms.find((a) => a.AlarmName === `${stack().stackName}-${suffix}`);
      expect(alarm, suffix).toMatchObject({
        MetricName: metric,
        Namespace: METRICS_NAMESPACE,
        Dimensions: [{ Name: 'service', Value: SERVICE_NAME }],
        Period: 60,
        Statistic: 'Sum',
        Threshold: 1,
        EvaluationPeriods: 3,
        DatapointsToAlarm: 3,
        TreatMissingData: 'notBreaching',
      });
    }
  });

  it("saves the renewer's runbook query over the renewer's own log group", () => {
    const json = templateOf(stack()).toJSON();
    const saved = Object.values(templateOf(stack()).findResources('AWS::Logs::QueryDefinition'))
      .map((r) => r.Properties)
      .filter((q) => String(q.Name).endsWith('/lease-renewals'));
    expect(saved).toHaveLength(1);
    const renewerLogs = refOf(
      json.Resources[idOf('LeaseRenewer', 'Function')].Properties.LoggingConfig.LogGroup,
    );
    expect(saved[0]?.Name).toBe(`${stack().stackName}/lease-renewals`);
    expect((saved[0]?.LogGroupNames as unknown[]).map(refOf)).toEqual([renewerLogs]);
    expect(saved[0]?.QueryString).toContain('lease renewal refused');
  });

  it("keeps every function's logs for the stage's retention, and past the stack in production", () => {
    const logs = templateOf(stack()).findResources('AWS::Logs::LogGroup');
    expect(Object.keys(logs)).toHaveLength(3);
    for (const [id, group] of Object.entries(logs)) {
      expect(group.Properties.RetentionInDays, id).toBe(stage.logRetentionDays);
      expect(group.DeletionPolicy, id).toBe('Retain');
    }
  });
});

describe('cdk-nag AwsSolutions, over all five stacks', () => {
  it('leaves no finding unacknowledged, and every acknowledgement gives its reason', () => {
    const report = new AwsSolutionsChecks().validateScope(app);
    expect(report.violations).toEqual([]);
    const acknowledged = (stack: Stack) =>
      stack.node
        .findAll()
        .flatMap((c) => c.node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY))
        .flatMap((m) => Object.entries(m.data as Record<string, string>))
        .map(([id, reason]) => [id.replace(/^Annotation::/, ''), reason] as const);
    const global = acknowledged(built.global);
    expect(global.map(([id]) => id).sort()).toEqual(
      ['AwsSolutions-DDB3', ...built.global.secrets.map(() => 'AwsSolutions-SMG4')].sort(),
    );
    for (const stack of Object.values(built)) {
      for (const [id, reason] of acknowledged(stack)) expect(reason.length, id).toBeGreaterThan(80);
    }
  });
});
