import { readFileSync } from 'node:fs';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { cdkJsonContext, createBrokerApp } from '../infra/broker-app.js';
import { SKIP_BUNDLING } from './support/infra-template.js';

/**
 * CDK's recommended feature flags are set in cdk.json, the tests synthesize with them (what `cdk deploy`
 * deploys), and turning them on replaces nothing that holds state or that callers address.
 */

/** Each synthesis of both stages takes seconds, far more on a loaded machine. */
const SYNTH_TIMEOUT_MS = 120_000;

const RECOMMENDED = JSON.parse(
  readFileSync(
    new URL('../node_modules/aws-cdk-lib/recommended-feature-flags.json', import.meta.url),
    'utf8',
  ),
) as Record<string, unknown>;

/** The flags cdk.json set before issue 14: what the deployed stacks were synthesized with. */
const DEPLOYED_BEFORE = {
  '@aws-cdk/aws-lambda:recognizeLayerVersion': true,
  '@aws-cdk/core:checkSecretUsage': true,
  '@aws-cdk/aws-iam:minimizePolicies': true,
};

/**
 * Resources whose replacement loses data or breaks a caller (a new table, key, log group, topic, e-mail
 * subscription to re-confirm, function or Function URL address, role ARN), and for each the properties
 * whose change makes CloudFormation replace it ("Update requires: Replacement"), with the deletion policies.
 */
const REPLACEMENT_SENSITIVE: Record<string, string[]> = {
  'AWS::DynamoDB::Table': ['TableName', 'KeySchema', 'LocalSecondaryIndexes'],
  'AWS::KMS::Key': ['KeySpec', 'KeyUsage', 'MultiRegion', 'Origin'],
  'AWS::KMS::Alias': ['AliasName'],
  'AWS::Logs::LogGroup': ['LogGroupName', 'LogGroupClass'],
  'AWS::SNS::Topic': ['TopicName', 'FifoTopic'],
  'AWS::SNS::Subscription': ['Endpoint', 'Protocol', 'TopicArn'],
  'AWS::Lambda::Function': ['FunctionName'],
  'AWS::Lambda::Url': ['TargetFunctionArn', 'Qualifier'],
  'AWS::Lambda::Alias': ['FunctionName', 'Name'],
  'AWS::IAM::Role': ['RoleName', 'Path'],
};

type Resources = Record<
  string,
  { Type: string; Properties?: Record<string, unknown>; DeletionPolicy?: string }
>;

/** Per stack: logical id → type and the replacement-sensitive values of the resources above. */
function sensitive(context: Record<string, unknown>): Record<string, Record<string, unknown>> {
  const { stacks } = createBrokerApp({ baseContext: context, context: SKIP_BUNDLING });
  return Object.fromEntries(
    stacks.map((stack) => {
      const resources = (Template.fromStack(stack).toJSON() as { Resources: Resources }).Resources;
      const kept = Object.entries(resources)
        .filter(([, r]) => REPLACEMENT_SENSITIVE[r.Type])
        .map(([id, r]) => [
          id,
          {
            Type: r.Type,
            DeletionPolicy: r.DeletionPolicy,
            ...Object.fromEntries((REPLACEMENT_SENSITIVE[r.Type] ?? []).map((p) => [p, r.Properties?.[p]])),
          },
        ]);
      return [stack.stackName, Object.fromEntries(kept)];
    }),
  );
}

describe('CDK feature flags', () => {
  it("sets every one of CDK's recommended flags in cdk.json, to its recommended value", () => {
    expect(Object.keys(RECOMMENDED).length).toBeGreaterThan(80);
    expect(cdkJsonContext()).toEqual(RECOMMENDED);
  });

  it(
    "synthesizes the app (and so every template test) with cdk.json's flags",
    () => {
      const { app, stacks } = createBrokerApp({ context: SKIP_BUNDLING });
      for (const [flag, value] of Object.entries(RECOMMENDED)) {
        expect(app.node.tryGetContext(flag), flag).toEqual(value);
      }
      // One flag's visible effect: @aws-cdk/core:enablePartitionLiterals writes the key policy's principal as
      // a literal ARN instead of a Fn::Join on AWS::Partition.
      const keys = Template.fromStack(stacks[0] as never).findResources('AWS::KMS::Key');
      const statement = Object.values(keys)[0]?.Properties.KeyPolicy.Statement[0];
      expect(statement.Principal.AWS).toBe(`arn:aws:iam::${stacks[0]?.account}:root`);
    },
    SYNTH_TIMEOUT_MS,
  );

  it(
    'replaces nothing that holds state or that callers address: same logical ids and replacement-sensitive properties',
    () => {
      const before = sensitive(DEPLOYED_BEFORE);
      const after = sensitive(cdkJsonContext());
      expect(Object.keys(after)).toEqual(['TokenBroker-uat', 'TokenBroker-prod']);
      for (const stack of Object.keys(after)) {
        const types = Object.values(after[stack] ?? {}).map((r) => (r as { Type: string }).Type);
        for (const type of [
          'AWS::DynamoDB::Table',
          'AWS::KMS::Key',
          'AWS::Logs::LogGroup',
          'AWS::Lambda::Url',
        ]) {
          expect(types, `${stack} ${type}`).toContain(type);
        }
      }
      expect(after).toEqual(before);
    },
    SYNTH_TIMEOUT_MS,
  );

  it(
    'keeps the stack tags on the stacks (explicitStackTags takes only those given in the stack props)',
    () => {
      const assembly = createBrokerApp({ context: SKIP_BUNDLING }).app.synth();
      const tags = assembly.stacks
        .map((s) => [s.stackName, s.tags])
        .sort(([a], [b]) => String(b).localeCompare(String(a)));
      expect(tags).toEqual([
        ['TokenBroker-uat', { service: 'token-broker', stage: 'uat' }],
        ['TokenBroker-prod', { service: 'token-broker', stage: 'prod' }],
      ]);
    },
    SYNTH_TIMEOUT_MS,
  );
});
