import { beforeAll, describe, expect, it } from 'vitest';
import { createBrokerApp } from '../infra/broker-app.js';
import { secretReaderArns, secretResourcePolicy } from '../infra/secret-policy.js';
import { functionConfigDocuments, parseStageConfig, type StageInput } from '../infra/stage-config.js';
import { STAGES } from '../infra/stages/index.js';
import { prod } from '../infra/stages/prod.js';
import { uat } from '../infra/stages/uat.js';
import { parseOperators } from '../shared/config/operators.js';
import {
  type Deployed,
  identityStatements,
  refOf,
  SKIP_BUNDLING,
  stageOf,
  synthesizeStages,
} from './support/infra-template.js';
import { stageFailureOf, variant } from './support/stage-variants.js';

/**
 * Who reaches what, as deployed: the refresher role's fixed name (the one the vendor secrets' resource
 * policy names) and the status-only operators' invoke rights. Each test fails without its fix.
 */
let deployed: Record<string, Deployed> = {};
/** A resource's properties by logical id. */
function propsOf<T>(d: Deployed, id: string): T {
  const resource = d.json.Resources[id];
  if (!resource) throw new Error(`no resource ${id}`);
  return resource.Properties as T;
}
beforeAll(() => {
  ({ deployed } = synthesizeStages());
});

describe.each(STAGES.map((s) => s.name))('stage %s', (name) => {
  const d = () => stageOf(deployed, name);

  it('gives the refresher the execution role the secrets’ resource policy names, and no other function it', () => {
    const { json, ids, stage } = d();
    const fn = propsOf<{ Role: unknown }>(d(), ids.refresher);
    expect(refOf(fn.Role)).toBe(ids.refresherRole);
    const role = propsOf<{ RoleName?: string; Path?: string }>(d(), ids.refresherRole);
    expect(role.RoleName).toBe(`token-broker-${stage.name}-refresher`);
    expect(role.Path ?? '/').toBe('/');
    // The ARN IAM gives that role (as aws:PrincipalArn) is the policy's first reader, written out by hand.
    const deployedArn = `arn:aws:iam::${stage.account}:role/${role.RoleName}`;
    const policy = secretResourcePolicy(stage);
    const [statement] = policy.Statement;
    const readers = (
      statement?.Condition as { StringNotEquals: { 'aws:PrincipalArn': string[] } } | undefined
    )?.StringNotEquals['aws:PrincipalArn'];
    expect(readers).toEqual([deployedArn, ...stage.breakGlassPrincipals]);
    expect(secretReaderArns(stage)).toEqual(readers);
    const vend = propsOf<{ Role: unknown }>(d(), ids.vend);
    expect(refOf(vend.Role)).not.toBe(ids.refresherRole);
    const named = Object.values(json.Resources)
      .filter((r) => r.Type === 'AWS::IAM::Role')
      .map((r) => r.Properties.RoleName)
      .filter(Boolean);
    expect(named).toEqual([role.RoleName]);
  });

  it("grants the vend URL to each operator's account, and names no operator outside the vend function's document", () => {
    const { template, ids, stage } = d();
    expect(stage.operators.length).toBeGreaterThan(0);
    const granted = Object.values(template.findResources('AWS::Lambda::Permission'))
      .map((p) => p.Properties)
      .filter((p) => p.Action === 'lambda:InvokeFunctionUrl')
      .map((p) => p.Principal);
    for (const operator of stage.operators) {
      expect(granted).toContain(operator.principalArn.split(':')[4]);
      // No permission, identity policy, role trust or environment names it: the vend function's own rules do.
      expect(JSON.stringify(d().json)).not.toContain(operator.principalArn);
      expect(JSON.stringify(identityStatements(template))).not.toContain(operator.principalArn);
    }
    expect(propsOf<{ Environment: unknown }>(d(), ids.vend).Environment).not.toHaveProperty(
      'Variables.OPERATORS',
    );
  });

  it('hands the operators to the vend function only, in a form its own parser accepts', () => {
    const { stage } = d();
    const documents = functionConfigDocuments(stage);
    expect(
      parseOperators(
        documents.vend.operators,
        stage.credentialSets.map((s) => s.id),
        'operators',
      ),
    ).toEqual(stage.operators);
    expect(documents.refresher).not.toHaveProperty('operators');
  });
});

describe('stage configuration: operators and break-glass principals', () => {
  const ONCALL = 'arn:aws:iam::111111111111:role/token-broker-oncall-uat';
  it.each<[string, StageInput, string]>([
    [
      'an operator principal that is not an IAM role or user ARN',
      variant(uat, (s) => Object.assign(s, { operators: [{ name: 'oncall', principalArn: 'oncall' }] })),
      'uat.operators[0].principalArn: an IAM role or user ARN',
    ],
    [
      'an operator given as an assumed-role session',
      variant(uat, (s) =>
        Object.assign(s, {
          operators: [
            { name: 'oncall', principalArn: 'arn:aws:sts::111111111111:assumed-role/token-broker-oncall/me' },
          ],
        }),
      ),
      'uat.operators[0].principalArn',
    ],
    [
      'two operators with one principal',
      variant(uat, (s) =>
        Object.assign(s, {
          operators: [
            { name: 'a', principalArn: ONCALL },
            { name: 'b', principalArn: ONCALL },
          ],
        }),
      ),
      `uat.operators[1].principalArn: duplicate principal "${ONCALL}"`,
    ],
    [
      'an operator naming a set the stage does not have',
      variant(uat, (s) =>
        Object.assign(s, {
          operators: [
            { name: 'oncall', principalArn: ONCALL, credentialSets: ['uat-advisor', 'prod-advisor'] },
          ],
        }),
      ),
      'uat.operators[0].credentialSets[1]: unknown credential set "prod-advisor"',
    ],
    [
      'a break-glass principal that is not an IAM ARN',
      variant(uat, (s) => Object.assign(s, { breakGlassPrincipals: ['*'] })),
      'uat.breakGlassPrincipals[0]: an IAM role or user ARN',
    ],
    [
      'a break-glass principal twice',
      variant(uat, (s) =>
        Object.assign(s, {
          breakGlassPrincipals: [
            'arn:aws:iam::111111111111:user/alice',
            'arn:aws:iam::111111111111:user/alice',
          ],
        }),
      ),
      'uat.breakGlassPrincipals[1]: duplicate principal',
    ],
    [
      'a break-glass principal of another account',
      variant(uat, (s) => Object.assign(s, { breakGlassPrincipals: ['arn:aws:iam::333333333333:role/sec'] })),
      "uat.breakGlassPrincipals[0]: not in the stage's account 111111111111",
    ],
    [
      'the refresher role as a break-glass principal',
      variant(uat, (s) =>
        Object.assign(s, {
          breakGlassPrincipals: ['arn:aws:iam::111111111111:role/token-broker-uat-refresher'],
        }),
      ),
      'uat.breakGlassPrincipals[0]: the refresher role reads the secrets already',
    ],
    [
      'a production stage without a break-glass principal',
      variant(prod, (s) => Object.assign(s, { breakGlassPrincipals: [] })),
      'prod.breakGlassPrincipals: a production stage needs at least one break-glass principal',
    ],
  ])('refuses %s', (_, input, expected) => {
    expect(stageFailureOf(input).message).toContain(expected);
  });

  it('accepts uat without break-glass principals or operators, and a consumer that is also an operator', () => {
    const bare = parseStageConfig(
      variant(uat, (s) => {
        delete (s as { operators?: unknown }).operators;
        delete (s as { breakGlassPrincipals?: unknown }).breakGlassPrincipals;
      }),
    );
    expect(bare.operators).toEqual([]);
    expect(bare.breakGlassPrincipals).toEqual([]);
    expect(secretResourcePolicy(bare).Statement[0]?.Condition).toEqual({
      StringNotEquals: { 'aws:PrincipalArn': ['arn:aws:iam::111111111111:role/token-broker-uat-refresher'] },
    });
    const both = variant(uat, (s) =>
      Object.assign(s, {
        operators: [{ name: 'portfolio-status', principalArn: s.consumers[0]?.principalArn }],
      }),
    );
    const { stacks } = createBrokerApp({ stages: [both], context: SKIP_BUNDLING });
    expect(stacks).toHaveLength(1);
  });

  it('counts the operators’ accounts among the accounts the Function URL is granted to', () => {
    const spread = variant(uat, (s) =>
      Object.assign(s, {
        operators: Array.from({ length: 20 }, (_, i) => ({
          name: `operator-${i}`,
          principalArn: `arn:aws:iam::${String(200_000_000_000 + i)}:role/token-broker-operator`,
        })),
      }),
    );
    expect(stageFailureOf(spread).message).toMatch(
      /uat\.urlAccess\.organizationId: consumers and operators are in 22 accounts; the Function URL's resource policy \(20 KB\) holds grants for 20/,
    );
  });
});
