import type { App, CfnElement } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { createBrokerApp } from '../../infra/broker-app.js';
import { type BrokerStack, stackName } from '../../infra/broker-stack.js';
import { parseStageConfig, type StageConfig } from '../../infra/stage-config.js';
import { STAGES } from '../../infra/stages/index.js';

/** Helpers for the template tests of infra/ (test/infra-*.test.ts). */
export type Json = Record<string, unknown>;
export interface Statement {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
}
export interface Deployed {
  stage: StageConfig;
  stack: BrokerStack;
  template: Template;
  json: { Resources: Record<string, { Type: string; Properties: Json }>; Outputs: Json };
  /** Logical ids of the two functions and their roles. */
  ids: { refresher: string; vend: string; refresherRole: string; vendRole: string };
}

export const SKIP_BUNDLING = { 'aws:cdk:bundling-stacks': [] };
export const actionsOf = (s: Statement): string[] => (Array.isArray(s.Action) ? s.Action : [s.Action]);
export const resourcesOf = (s: Statement): unknown[] =>
  Array.isArray(s.Resource) ? s.Resource : [s.Resource];
export const refOf = (value: unknown): string | undefined => {
  const v = value as { Ref?: string; 'Fn::GetAtt'?: [string, string] };
  return v?.Ref ?? v?.['Fn::GetAtt']?.[0];
};

/** An ARN as IAM sees it after deployment: Fn::Join resolved with the partition of the commercial Regions. */
export function resolveArn(value: unknown): string {
  if (typeof value === 'string') return value;
  const join = (value as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
  if (!join) return JSON.stringify(value);
  return join[1]
    .map((part) => {
      if (typeof part === 'string') return part;
      if (refOf(part) === 'AWS::Partition') return 'aws';
      return `<${JSON.stringify(part)}>`;
    })
    .join(join[0]);
}

/** Every identity-policy statement in a template, with the roles it is attached to. */
export function identityStatements(template: Template): { roles: string[]; statement: Statement }[] {
  const found: { roles: string[]; statement: Statement }[] = [];
  for (const policy of Object.values(template.findResources('AWS::IAM::Policy'))) {
    const roles = ((policy.Properties.Roles ?? []) as unknown[]).map((r) => refOf(r) ?? '');
    for (const statement of policy.Properties.PolicyDocument.Statement as Statement[]) {
      found.push({ roles, statement });
    }
  }
  for (const [id, role] of Object.entries(template.findResources('AWS::IAM::Role'))) {
    for (const inline of (role.Properties.Policies ?? []) as {
      PolicyDocument: { Statement: Statement[] };
    }[]) {
      for (const statement of inline.PolicyDocument.Statement) found.push({ roles: [id], statement });
    }
  }
  for (const managed of Object.values(template.findResources('AWS::IAM::ManagedPolicy'))) {
    const roles = ((managed.Properties.Roles ?? []) as unknown[]).map((r) => refOf(r) ?? '');
    for (const statement of managed.Properties.PolicyDocument.Statement as Statement[]) {
      found.push({ roles, statement });
    }
  }
  return found;
}

/** Statements granting any action of these services on Resource "*". */
export function wildcardGrants(template: Template, services: string[]): Statement[] {
  return identityStatements(template)
    .map(({ statement }) => statement)
    .filter(
      (s) =>
        s.Effect === 'Allow' &&
        resourcesOf(s).includes('*') &&
        actionsOf(s).some((action) =>
          services.some((service) => action.startsWith(`${service}:`) || action === '*'),
        ),
    );
}

/** One stage of what synthesizeStages returned; a test of a stage that was not synthesized fails at once. */
export function stageOf(deployed: Record<string, Deployed>, name: string): Deployed {
  const found = deployed[name];
  if (!found) throw new Error(`stage ${name} was not synthesized`);
  return found;
}

/** Every stage's stack, synthesized once (bundling skipped), with what the tests look things up by. */
export function synthesizeStages(): { app: App; deployed: Record<string, Deployed> } {
  const deployed: Record<string, Deployed> = {};
  const built = createBrokerApp({ context: SKIP_BUNDLING });
  const configs = STAGES.map(parseStageConfig);
  for (const stack of built.stacks) {
    const stage = configs.find((config) => stackName(config) === stack.stackName);
    if (!stage) throw new Error(`no stage for ${stack.stackName}`);
    const template = Template.fromStack(stack);
    const logicalId = (child: string) =>
      stack.getLogicalId(stack.node.findChild(child).node.defaultChild as CfnElement);
    deployed[stage.name] = {
      stage,
      stack,
      template,
      json: template.toJSON() as Deployed['json'],
      ids: {
        refresher: logicalId('Refresher'),
        vend: logicalId('Vend'),
        refresherRole: logicalId('RefresherRole'),
        vendRole: logicalId('VendRole'),
      },
    };
  }
  return { app: built.app, deployed };
}
