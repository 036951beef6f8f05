import { readFileSync } from 'node:fs';
import path from 'node:path';
import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { PortfolioServiceStack } from '../client/examples/consumer-iam.js';
import { uat } from '../infra/stages/uat.js';
import { ROOT } from '../packaging/build.js';

/**
 * client/examples/consumer-iam.ts, the CDK a consumer's stack adds (client/README.md shows the file whole):
 * synthesized, its policy is the statement docs/deploying.md gives as JSON, for a role the UAT stage's
 * `consumers` names. No engine, no bundling (the stack has no function).
 */
const broker = { account: uat.account, region: uat.region, vendFunctionName: 'TokenBroker-uat-Vend-EXAMPLE' };
const stack = new PortfolioServiceStack(new App(), 'PortfolioService', {
  env: { account: uat.account, region: uat.region },
  broker,
});
const template = Template.fromStack(stack);

/** docs/deploying.md's statement ("Giving a consumer access"), as JSON. */
function documentedStatement(): { Action: string[]; Resource: string; Condition: unknown; Effect: string } {
  const doc = readFileSync(path.join(ROOT, 'docs/deploying.md'), 'utf8');
  const section = doc.slice(doc.indexOf('### Giving a consumer access'));
  return JSON.parse(/```json\n([\s\S]*?)```/.exec(section)?.[1] ?? '{}');
}

describe('client/examples/consumer-iam.ts: a consumer role’s access to the vend Function URL', () => {
  it('grants the role the statement docs/deploying.md gives: both actions on the live alias, via the URL only', () => {
    const documented = documentedStatement();
    expect(documented.Action).toEqual(['lambda:InvokeFunctionUrl', 'lambda:InvokeFunction']);
    template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: [
          {
            Effect: documented.Effect,
            Action: documented.Action,
            Resource: documented.Resource.replace('222222222222', uat.account).replace(
              '<vend function name>',
              broker.vendFunctionName,
            ),
            Condition: documented.Condition,
          },
        ],
      },
      Roles: [{ Ref: Match.stringLikeRegexp('^ServiceRole') }],
    });
    template.resourceCountIs('AWS::IAM::Policy', 1);
  });

  it('names the role the UAT stage’s consumers entry names: the sets it may use are that entry’s', () => {
    template.hasResourceProperties('AWS::IAM::Role', { RoleName: 'portfolio-service-uat' });
    const entry = uat.consumers.find(
      (c) => c.principalArn === `arn:aws:iam::${uat.account}:role/portfolio-service-uat`,
    );
    expect(entry?.credentialSets).toContain('uat-advisor');
  });

  it('client/README.md shows the file as it is, and the consumers entry as the UAT stage has it', () => {
    const readme = readFileSync(path.join(ROOT, 'client/README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('### Giving the service access (IAM, in CDK)'));
    const [entry, file] = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]);
    expect(file).toBe(readFileSync(path.join(ROOT, 'client/examples/consumer-iam.ts'), 'utf8'));
    const shown = uat.consumers.find((c) => c.name === 'portfolio-service');
    expect(entry).toContain(`principalArn: '${shown?.principalArn}'`);
    expect(entry).toContain(
      `credentialSets: ${JSON.stringify(shown?.credentialSets).replaceAll('"', "'").replaceAll(',', ', ')}`,
    );
  });
});
