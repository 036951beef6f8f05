import { App, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { STAGES } from '../infra/stages/index.js';
import {
  actionsOf,
  type Deployed,
  identityStatements,
  refOf,
  resolveArn,
  resourcesOf,
  type Statement,
  stageOf,
  synthesizeStages,
  wildcardGrants,
} from './support/infra-template.js';

let deployed: Record<string, Deployed> = {};
let app: App;

beforeAll(() => {
  ({ app, deployed } = synthesizeStages());
});

/** The security properties of the stack, one test each, for every stage; and cdk-nag. */
describe.each(STAGES.map((s) => s.name))('stage %s', (name) => {
  const d = () => stageOf(deployed, name);

  it('serves the vend function only through a Function URL with AWS_IAM auth', () => {
    const urls = d().template.findResources('AWS::Lambda::Url');
    expect(Object.values(urls).map((u) => u.Properties.AuthType)).toEqual(['AWS_IAM']);
    expect(refOf(Object.values(urls)[0]?.Properties.TargetFunctionArn)).toBe(d().ids.vend);
  });

  it("lets exactly the consumers' and operators' accounts invoke the URL, and nobody else invoke the function", () => {
    const permissions = Object.values(d().template.findResources('AWS::Lambda::Permission')).map(
      (p) => p.Properties,
    );
    // The URL serves the vend function's one alias: every grant outside the refresher's is on that alias,
    // none on the function itself or on a version.
    const aliases = Object.keys(d().template.findResources('AWS::Lambda::Alias'));
    expect(aliases).toHaveLength(1);
    const notRefresher = permissions.filter((p) => refOf(p.FunctionName) !== d().ids.refresher);
    expect(notRefresher.filter((p) => refOf(p.FunctionName) !== aliases[0])).toEqual([]);
    const onVend = permissions.filter((p) => refOf(p.FunctionName) === aliases[0]);
    const urlGrants = onVend.filter((p) => p.Action === 'lambda:InvokeFunctionUrl');
    // One grant per account, written out by hand from the stage's principal ARNs: the vend function's own
    // rules (its configuration document) decide which principal of those accounts gets what.
    const { consumers, operators } = d().stage;
    const accounts = [
      ...new Set(
        [...consumers, ...operators].map((c) => /^arn:aws:iam::(\d{12}):/.exec(c.principalArn)?.[1]),
      ),
    ];
    expect(urlGrants.map((p) => p.Principal).sort()).toEqual(accounts.sort());
    for (const grant of urlGrants) {
      expect(grant.FunctionUrlAuthType).toBe('AWS_IAM');
      expect(grant.PrincipalOrgID).toBeUndefined();
    }
    // Lambda's dual authorisation for URLs: InvokeFunction, but only when it comes through the URL.
    const invokeGrants = onVend.filter((p) => p.Action === 'lambda:InvokeFunction');
    expect(invokeGrants.map((p) => p.Principal).sort()).toEqual(urlGrants.map((p) => p.Principal).sort());
    for (const grant of invokeGrants) expect(grant.InvokedViaFunctionUrl).toBe(true);
    expect(onVend).toHaveLength(urlGrants.length + invokeGrants.length);
    expect(permissions.filter((p) => p.Principal === '*')).toEqual([]);
  });

  it('has no IAM statement with Resource "*" for Secrets Manager, DynamoDB or KMS actions', () => {
    expect(identityStatements(d().template).length).toBeGreaterThan(0);
    expect(wildcardGrants(d().template, ['secretsmanager', 'dynamodb', 'kms'])).toEqual([]);
  });

  it("gives the refresher secretsmanager:GetSecretValue on exactly the stage's secret ARNs, nothing more", () => {
    const { stage, ids } = d();
    const secretStatements = identityStatements(d().template).filter(({ statement }) =>
      actionsOf(statement).some((a) => a.startsWith('secretsmanager:')),
    );
    expect(secretStatements).toHaveLength(1);
    const [only] = secretStatements;
    expect(only?.roles).toEqual([ids.refresherRole]);
    expect(actionsOf(only?.statement as Statement)).toEqual(['secretsmanager:GetSecretValue']);
    const expected = stage.credentialSets.map(
      (set) => `arn:aws:secretsmanager:${stage.region}:${stage.account}:secret:${set.secretName}-??????`,
    );
    expect(
      resourcesOf(only?.statement as Statement)
        .map(resolveArn)
        .sort(),
    ).toEqual(expected.sort());
  });

  it('gives the vend function no Secrets Manager permission, and lets it invoke only the refresher', () => {
    const { ids } = d();
    const vendStatements = identityStatements(d().template)
      .filter(({ roles }) => roles.includes(ids.vendRole))
      .map(({ statement }) => statement);
    expect(vendStatements.length).toBeGreaterThan(0);
    expect(vendStatements.flatMap(actionsOf).filter((a) => a.startsWith('secretsmanager:'))).toEqual([]);
    const invoke = vendStatements.filter((s) => actionsOf(s).some((a) => a.startsWith('lambda:')));
    expect(invoke.map((s) => [actionsOf(s), resourcesOf(s).map(refOf)])).toEqual([
      [['lambda:InvokeFunction'], [ids.refresher]],
    ]);
  });

  it('lets the refresher alone write tokens, and the vend function alone touch the ledger', () => {
    const { template, ids } = d();
    const tableIds = Object.keys(template.findResources('AWS::DynamoDB::Table'));
    const outputs = d().json.Outputs as Record<string, { Value: unknown }>;
    const tokensTable = refOf(outputs.TokensTableName?.Value);
    const ledgerTable = tableIds.find((id) => id !== tokensTable);
    const access = (role: string, table: string | undefined) =>
      identityStatements(template)
        .filter(
          ({ roles, statement }) =>
            roles.includes(role) && resourcesOf(statement).some((r) => refOf(r) === table),
        )
        .flatMap(({ statement }) => actionsOf(statement));
    const writes = (actions: string[]) =>
      actions.filter((a) => /^dynamodb:(PutItem|UpdateItem|DeleteItem|BatchWriteItem)$/.test(a));
    expect(writes(access(ids.refresherRole, tokensTable)).length).toBeGreaterThan(0);
    expect(access(ids.vendRole, tokensTable)).toContain('dynamodb:GetItem');
    expect(writes(access(ids.vendRole, tokensTable))).toEqual([]);
    expect(writes(access(ids.vendRole, ledgerTable)).length).toBeGreaterThan(0);
    expect(access(ids.refresherRole, ledgerTable)).toEqual([]);
  });

  it('keeps secret values out of the template: secrets are referenced by name only', () => {
    const text = JSON.stringify(d().json);
    expect(Object.keys(d().template.findResources('AWS::SecretsManager::Secret'))).toEqual([]);
    expect(text).not.toContain('{{resolve:secretsmanager');
    expect(text).not.toMatch(/"password"/i);
  });

  it('encrypts both tables with the rotating customer-managed key, with TTL, on demand', () => {
    const { template, stage } = d();
    const keys = template.findResources('AWS::KMS::Key');
    expect(Object.values(keys).map((k) => k.Properties.EnableKeyRotation)).toEqual([true]);
    const keyId = Object.keys(keys)[0];
    const tables = Object.values(template.findResources('AWS::DynamoDB::Table')).map((t) => t.Properties);
    expect(tables).toHaveLength(2);
    for (const table of tables) {
      expect(table.SSESpecification).toEqual({
        SSEEnabled: true,
        SSEType: 'KMS',
        KMSMasterKeyId: { 'Fn::GetAtt': [keyId, 'Arn'] },
      });
      expect(table.TimeToLiveSpecification).toEqual({ AttributeName: 'purgeAt', Enabled: true });
      expect(table.KeySchema).toEqual([{ AttributeName: 'pk', KeyType: 'HASH' }]);
      expect(table.BillingMode).toBe('PAY_PER_REQUEST');
      expect(table.DeletionProtectionEnabled).toBe(stage.production);
    }
  });
});

describe('cdk-nag AwsSolutions', () => {
  it('leaves no finding unacknowledged, and every acknowledgement gives its reason', () => {
    const report = new AwsSolutionsChecks().validateScope(app);
    expect(report.violations).toEqual([]);
    const acknowledgements = app.node
      .findAll()
      .flatMap((c) => c.node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY))
      .flatMap((m) => Object.entries(m.data as Record<string, string>));
    expect(acknowledgements.length).toBeGreaterThan(0);
    for (const [id, reason] of acknowledgements) expect(reason.length, id).toBeGreaterThan(80);
  });

  it('does report findings (the check is live), and so does the wildcard scan above', () => {
    const bare = new Stack(new App(), 'Bare');
    const role = new Role(bare, 'Role', { assumedBy: new ServicePrincipal('lambda.amazonaws.com') });
    role.addToPolicy(new PolicyStatement({ actions: ['dynamodb:GetItem'], resources: ['*'] }));
    const report = new AwsSolutionsChecks().validateScope(bare);
    expect(report.violations.map((v) => v.ruleName)).toContain('AwsSolutions-IAM5[Resource::*]');
    expect(wildcardGrants(Template.fromStack(bare), ['secretsmanager', 'dynamodb', 'kms'])).toHaveLength(1);
  });
});
