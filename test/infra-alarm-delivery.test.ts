import { beforeAll, describe, expect, it } from 'vitest';
import { STAGES } from '../infra/stages/index.js';
import {
  type Deployed,
  type Json,
  refOf,
  resolveArn,
  stageOf,
  synthesizeStages,
} from './support/infra-template.js';

let deployed: Record<string, Deployed> = {};

// Synthesizing both stages takes seconds, and longer on a loaded machine: a generous bound, not a measurement.
beforeAll(() => {
  ({ deployed } = synthesizeStages());
}, 180_000);

/** A resource-policy statement as CloudFormation holds it (topic policy, key policy). */
interface PolicyStatement {
  Effect: 'Allow' | 'Deny';
  Principal?: unknown;
  Action: string | string[];
  Resource?: unknown;
  Condition?: Record<string, Record<string, unknown>>;
}

/** What a request carries when CloudWatch acts for one alarm: the keys AWS sets for a service principal. */
type RequestContext = Record<string, string>;

const list = <T>(value: T | T[] | undefined): T[] =>
  value === undefined ? [] : Array.isArray(value) ? value : [value];

/** IAM's wildcards: `*` any run of characters, `?` one. */
function globMatches(pattern: string, value: string, ignoreCase = false): boolean {
  const source = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${source}$`, ignoreCase ? 'i' : '').test(value);
}

/** ArnLike: the six colon-separated parts compared one by one, each with wildcards. */
function arnLike(pattern: string, arn: string): boolean {
  const parts = (text: string) => {
    const split = text.split(':');
    return [...split.slice(0, 5), split.slice(5).join(':')];
  };
  const [p, a] = [parts(pattern), parts(arn)];
  return p.length === 6 && a.length === 6 && p.every((part, i) => globMatches(part, a[i] ?? ''));
}

/**
 * Whether a statement's conditions hold for the request: every operator, every key (AND), any of a key's
 * values (OR). A key the request lacks fails the condition. An operator this evaluator does not know counts
 * as holding in a Deny (it might deny) and as failing in an Allow (it might not allow): never optimistic.
 */
function conditionsHold(statement: PolicyStatement, context: RequestContext): boolean {
  for (const [operator, keys] of Object.entries(statement.Condition ?? {})) {
    for (const [key, expected] of Object.entries(keys)) {
      const actual = context[key];
      const values = list(expected).map(resolveArn);
      if (actual === undefined) return false;
      let holds: boolean;
      switch (operator) {
        case 'StringEquals':
        case 'ArnEquals':
          holds = values.includes(actual);
          break;
        case 'StringLike':
          holds = values.some((v) => globMatches(v, actual));
          break;
        case 'ArnLike':
          holds = values.some((v) => arnLike(v, actual));
          break;
        case 'Bool':
          holds = values.map((v) => String(v).toLowerCase()).includes(actual);
          break;
        default:
          holds = statement.Effect === 'Deny';
      }
      if (!holds) return false;
    }
  }
  return true;
}

function principalIsService(statement: PolicyStatement, service: string): boolean {
  const principal = statement.Principal as { Service?: unknown; AWS?: unknown } | string | undefined;
  if (principal === '*') return true;
  if (typeof principal !== 'object') return false;
  return list(principal.AWS).includes('*') || list(principal.Service).includes(service);
}

/** Allowed by some statement and denied by none, as IAM decides within one resource policy. */
function allows(
  statements: PolicyStatement[],
  request: { action: string; resource: (r: unknown) => boolean; context: RequestContext },
): boolean {
  const applies = (s: PolicyStatement) =>
    principalIsService(s, 'cloudwatch.amazonaws.com') &&
    list(s.Action).some((a) => globMatches(a, request.action, true)) &&
    list(s.Resource).some(request.resource) &&
    conditionsHold(s, request.context);
  const matching = statements.filter(applies);
  return matching.some((s) => s.Effect === 'Allow') && !matching.some((s) => s.Effect === 'Deny');
}

/** What CloudWatch's request carries when it notifies for the alarm `name` of `account` in `region`. */
const alarmContext = (account: string, region: string, name: string): RequestContext => ({
  'aws:SourceAccount': account,
  'aws:SourceArn': `arn:aws:cloudwatch:${region}:${account}:alarm:${name}`,
  'aws:SecureTransport': 'true',
});

/**
 * Alarm delivery as deployed: CloudWatch publishes to the alarm topic as its service principal, on behalf of
 * each alarm, and the topic's key must let it encrypt the message. The policies are evaluated against each
 * alarm's own ARN and account, so an alarm that could not publish fails the test.
 */
describe.each(STAGES.map((s) => s.name))('stage %s', (name) => {
  const d = () => stageOf(deployed, name);
  const topicPolicies = (topicId: string) =>
    Object.values(d().template.findResources('AWS::SNS::TopicPolicy'))
      .filter((p) => list(p.Properties.Topics).some((t) => refOf(t) === topicId))
      .flatMap((p) => p.Properties.PolicyDocument.Statement as PolicyStatement[]);
  /** The key policy of the topic's key (the topic names it by ARN). */
  const keyPolicyOf = (topicId: string) => {
    const topic = d().json.Resources[topicId]?.Properties ?? {};
    const keyId = refOf(topic.KmsMasterKeyId);
    expect(keyId, `${topicId} is encrypted with a key of the stack`).toBeDefined();
    const key = d().json.Resources[keyId ?? '']?.Properties as {
      KeyPolicy: { Statement: PolicyStatement[] };
    };
    return key.KeyPolicy.Statement;
  };
  const canPublish = (topicId: string, context: RequestContext) =>
    allows(topicPolicies(topicId), {
      action: 'sns:Publish',
      resource: (r) => r === '*' || refOf(r) === topicId,
      context,
    });
  const canUseKey = (topicId: string, context: RequestContext) =>
    ['kms:GenerateDataKey', 'kms:Decrypt'].every((action) =>
      allows(keyPolicyOf(topicId), { action, resource: (r) => r === '*', context }),
    );

  it("lets CloudWatch publish every alarm's notifications to each of its topics, and use the topic's key", () => {
    const { stage } = d();
    const alarms = Object.values(d().template.findResources('AWS::CloudWatch::Alarm')).map(
      (a) => a.Properties as Json & { AlarmName: string },
    );
    expect(alarms.length).toBeGreaterThan(20);
    for (const alarm of alarms) {
      const topics = [...list(alarm.AlarmActions), ...list(alarm.OKActions)].map((t) => refOf(t) ?? '');
      expect(topics.length, alarm.AlarmName).toBeGreaterThan(0);
      const context = alarmContext(stage.account, stage.region, alarm.AlarmName);
      for (const topicId of topics) {
        expect(canPublish(topicId, context), `${alarm.AlarmName} → sns:Publish on ${topicId}`).toBe(true);
        expect(canUseKey(topicId, context), `${alarm.AlarmName} → the key of ${topicId}`).toBe(true);
      }
    }
  });

  it("keeps the TLS-only deny, and lets no other account's or stack's alarms use the topic or its key", () => {
    const { stage } = d();
    const topicId = Object.keys(d().template.findResources('AWS::SNS::Topic'))[0] ?? '';
    const ours = alarmContext(stage.account, stage.region, `TokenBroker-${stage.name}-vend-errors`);
    expect(canPublish(topicId, { ...ours, 'aws:SecureTransport': 'false' })).toBe(false);
    const strangers = [
      alarmContext('999999999999', stage.region, `TokenBroker-${stage.name}-vend-errors`),
      alarmContext(stage.account, stage.region, 'SomeOtherApp-cpu-high'),
      alarmContext(stage.account, 'us-east-1', `TokenBroker-${stage.name}-vend-errors`),
      // An alarm of another account naming ours as its source account: the ARN gives it away.
      { ...alarmContext('999999999999', stage.region, 'x'), 'aws:SourceAccount': stage.account },
    ];
    for (const context of strangers) {
      expect(canPublish(topicId, context), context['aws:SourceArn']).toBe(false);
      expect(canUseKey(topicId, context), context['aws:SourceArn']).toBe(false);
    }
  });
});

describe('the policy evaluator of this file', () => {
  const allow = (condition?: PolicyStatement['Condition']): PolicyStatement[] => [
    {
      Effect: 'Allow',
      Principal: { Service: 'cloudwatch.amazonaws.com' },
      Action: 'sns:Publish',
      Resource: '*',
      ...(condition ? { Condition: condition } : {}),
    },
  ];
  const request = (context: RequestContext) => ({ action: 'sns:Publish', resource: () => true, context });
  const ctx = alarmContext('111111111111', 'eu-west-1', 'TokenBroker-uat-a');

  it('refuses what no statement allows, and applies wildcards and conditions as IAM does', () => {
    expect(allows([], request(ctx))).toBe(false);
    expect(allows(allow(), request(ctx))).toBe(true);
    expect(
      allows(
        allow({ ArnLike: { 'aws:SourceArn': 'arn:*:cloudwatch:*:*:alarm:TokenBroker-uat-*' } }),
        request(ctx),
      ),
    ).toBe(true);
    expect(
      allows(
        allow({ ArnLike: { 'aws:SourceArn': 'arn:*:cloudwatch:*:*:alarm:TokenBroker-prod-*' } }),
        request(ctx),
      ),
    ).toBe(false);
    expect(allows(allow({ StringEquals: { 'aws:SourceAccount': '222222222222' } }), request(ctx))).toBe(
      false,
    );
    expect(allows(allow({ StringEquals: { 'aws:SourceOrgID': 'o-1' } }), request(ctx))).toBe(false);
    expect(allows(allow({ NumericLessThan: { 'aws:SourceAccount': '1' } }), request(ctx))).toBe(false);
    const denied = [...allow(), { ...(allow()[0] as PolicyStatement), Effect: 'Deny' as const }];
    expect(allows(denied, request(ctx))).toBe(false);
  });
});
