import { readFileSync } from 'node:fs';
import { type App, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { createBrokerApp } from '../infra/broker-app.js';
import { type PipelineInput, parsePipelineConfig } from '../infra/pipeline-config.js';
import type { PipelineStack } from '../infra/pipeline-stack.js';
import { parseStageConfig } from '../infra/stage-config.js';
import { STAGES } from '../infra/stages/index.js';
import { pipeline as committed } from '../infra/stages/pipeline.js';
import { ConfigurationError } from '../shared/errors.js';
import {
  actionsOf,
  identityStatements,
  resolveArn,
  resourcesOf,
  SKIP_BUNDLING,
} from './support/infra-template.js';

/**
 * The pipeline stack (`-c pipeline=true`): UAT deploy → smoke test → prod diff → approval → prod deploy, each
 * stage deployed into the same CloudFormation stack a manual deploy uses; its configuration validated; cdk-nag.
 */

interface Action {
  Name: string;
  RunOrder: number;
  ActionTypeId: { Category: string; Provider: string };
  Configuration: Record<string, unknown>;
  Namespace?: string;
  RoleArn?: unknown;
}
interface PipelineStage {
  Name: string;
  Actions: Action[];
}

let app: App;
let stack: PipelineStack;
let template: Template;
let stages: PipelineStage[];

beforeAll(() => {
  const built = createBrokerApp({ context: { ...SKIP_BUNDLING, pipeline: 'true' } });
  if (!built.pipeline) throw new Error('no pipeline stack with -c pipeline=true');
  app = built.app;
  stack = built.pipeline;
  template = Template.fromStack(stack);
  const pipelines = Object.values(template.findResources('AWS::CodePipeline::Pipeline'));
  expect(pipelines).toHaveLength(1);
  stages = pipelines[0]?.Properties.Stages as PipelineStage[];
}, 120_000);

const stageNamed = (name: string): PipelineStage => {
  const found = stages.find((s) => s.Name === name);
  if (!found) throw new Error(`no pipeline stage ${name}: ${stages.map((s) => s.Name).join(', ')}`);
  return found;
};
const actionNamed = (stage: PipelineStage, name: string): Action => {
  const found = stage.Actions.find((a) => a.Name === name);
  if (!found) throw new Error(`no action ${name} in ${stage.Name}`);
  return found;
};
const deploys = (stage: PipelineStage) =>
  stage.Actions.filter((a) => a.ActionTypeId.Provider === 'CloudFormation');
/** The buildspec of the CodeBuild project a pipeline action runs. */
function buildSpecOf(action: Action): { phases: { build: { commands: string[] } } } {
  const project = (action.Configuration.ProjectName as { Ref: string }).Ref;
  const spec = template.toJSON().Resources[project].Properties.Source.BuildSpec as string;
  return JSON.parse(spec);
}

describe('the pipeline', () => {
  it('builds from the configured repository and branch, and synthesizes after the checks CI runs', () => {
    const source = stageNamed('Source').Actions[0];
    expect(source?.ActionTypeId.Provider).toBe('CodeStarSourceConnection');
    expect(source?.Configuration).toMatchObject({
      ConnectionArn: committed.connectionArn,
      FullRepositoryId: committed.repository,
      BranchName: committed.branch,
      // A clone with history for the steps (test/ledger-releases.test.ts takes release N-1 from git).
      OutputArtifactFormat: 'CODEBUILD_CLONE_REF',
    });
    expect(buildSpecOf(actionNamed(stageNamed('Build'), 'Synth')).phases.build.commands).toEqual([
      'bash .ci/run',
    ]);
    // CI's run ends with the pipeline's own synth, the assembly this step hands on.
    expect(readFileSync(new URL('../.ci/run', import.meta.url), 'utf8')).toMatch(
      /npm run synth:pipeline\s*(;|fi|$)/,
    );
  });

  it('runs UAT deploy → smoke test → prod diff → approval → prod deploy, in that order', () => {
    const names = stages.map((s) => s.Name);
    expect(names.indexOf('Uat')).toBeGreaterThan(names.indexOf('Build'));
    expect(names.indexOf('Prod')).toBe(names.indexOf('Uat') + 1);
    const uat = stageNamed('Uat');
    const prod = stageNamed('Prod');
    const smoke = actionNamed(uat, 'SmokeTest');
    const diff = actionNamed(prod, 'ProdDiff');
    const approval = actionNamed(prod, 'ApproveProd');
    expect(deploys(uat).map((a) => a.Configuration.StackName)).toEqual([
      'TokenBroker-uat',
      'TokenBroker-uat',
    ]);
    expect(Math.max(...deploys(uat).map((a) => a.RunOrder))).toBeLessThan(smoke.RunOrder);
    expect(diff.RunOrder).toBeLessThan(approval.RunOrder);
    expect(approval.ActionTypeId).toMatchObject({ Category: 'Approval', Provider: 'Manual' });
    expect(approval.Configuration.CustomData).toContain('ProdDiff');
    // Prod waits for the approval: its change set is neither created nor executed before.
    expect(deploys(prod).map((a) => a.Configuration.StackName)).toEqual([
      'TokenBroker-prod',
      'TokenBroker-prod',
    ]);
    for (const deploy of deploys(prod)) expect(deploy.RunOrder).toBeGreaterThan(approval.RunOrder);
    expect(prod.Actions.map((a) => a.Name).sort()).toEqual(
      ['ApproveProd', 'ProdDiff', ...deploys(prod).map((a) => a.Name)].sort(),
    );
  });

  it('deploys each stage through that account’s CDK bootstrap deploy role', () => {
    for (const [name, stage] of [
      ['Uat', parseStageConfig(STAGES[0] as never)],
      ['Prod', parseStageConfig(STAGES[1] as never)],
    ] as const) {
      for (const deploy of deploys(stageNamed(name))) {
        expect(resolveArn(deploy.RoleArn)).toBe(
          `arn:aws:iam::${stage.account}:role/cdk-hnb659fds-deploy-role-${stage.account}-${stage.region}`,
        );
      }
    }
  });

  it('smoke-tests UAT with `token-broker token` against its VendUrl output, the token kept out of the log', () => {
    const uat = stageNamed('Uat');
    const smoke = actionNamed(uat, 'SmokeTest');
    expect(buildSpecOf(smoke).phases.build.commands).toContain(
      `npx token-broker token ${committed.smokeTest.credentialSet} --url "$VEND_URL" > /dev/null`,
    );
    const namespace = deploys(uat).find((a) => a.Namespace)?.Namespace;
    expect(namespace).toBeDefined();
    expect(JSON.parse(smoke.Configuration.EnvironmentVariables as string)).toEqual([
      { name: 'VEND_URL', type: 'PLAINTEXT', value: `#{${namespace}.VendUrl}` },
    ]);
  });

  it("runs the smoke test as a UAT consumer: the named role, allowed the UAT vend function's URL", () => {
    const smokeProject = (
      actionNamed(stageNamed('Uat'), 'SmokeTest').Configuration.ProjectName as { Ref: string }
    ).Ref;
    const project = template.toJSON().Resources[smokeProject].Properties;
    const roleId = (project.ServiceRole as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    expect(template.toJSON().Resources[roleId].Properties.RoleName).toBe(committed.smokeTest.roleName);
    const uat = parseStageConfig(STAGES[0] as never);
    const role = `arn:aws:iam::${committed.account}:role/${committed.smokeTest.roleName}`;
    expect(uat.consumers.find((c) => c.principalArn === role)?.credentialSets).toEqual([
      committed.smokeTest.credentialSet,
    ]);
    const lambda = identityStatements(template)
      .filter(({ roles }) => roles.includes(roleId))
      .map(({ statement }) => statement)
      .filter((s) => actionsOf(s).some((a) => a.startsWith('lambda:')));
    expect(lambda.flatMap(actionsOf).sort()).toEqual(['lambda:InvokeFunction', 'lambda:InvokeFunctionUrl']);
    for (const s of lambda) {
      expect(resourcesOf(s)).toEqual([
        `arn:aws:lambda:${uat.region}:${uat.account}:function:TokenBroker-uat-Vend*`,
      ]);
    }
  });

  it('diffs prod from the assembly it deploys, reading prod through the lookup role only', () => {
    const diff = actionNamed(stageNamed('Prod'), 'ProdDiff');
    const command = buildSpecOf(diff).phases.build.commands.at(-1);
    expect(command).toBe(
      'npx cdk diff --app cdk.pipeline.out/assembly-TokenBroker-pipeline-Prod --no-change-set',
    );
    const nested = app.synth().getNestedAssembly('assembly-TokenBroker-pipeline-Prod');
    expect(nested.stacks.map((s) => [s.stackName, s.environment.account])).toEqual([
      ['TokenBroker-prod', '222222222222'],
    ]);
    const project = (diff.Configuration.ProjectName as { Ref: string }).Ref;
    const roleId = (
      template.toJSON().Resources[project].Properties.ServiceRole as { 'Fn::GetAtt': [string, string] }
    )['Fn::GetAtt'][0];
    const assumes = identityStatements(template)
      .filter(
        ({ roles, statement }) => roles.includes(roleId) && actionsOf(statement).includes('sts:AssumeRole'),
      )
      .flatMap(({ statement }) => resourcesOf(statement).map(resolveArn));
    expect(assumes).toEqual([
      'arn:aws:iam::222222222222:role/cdk-hnb659fds-lookup-role-222222222222-eu-west-1',
    ]);
  });

  it("deploys the stacks a manual deploy does: same stack names, the stages' templates equal the standalone ones", () => {
    /**
     * Two differences are expected: the placeholder asset keys of a synth without bundling (a real synth
     * hashes the bundle's content, the same in both) and the vend version's id that hashes them, and the logical id of the schedule's permission to
     * invoke the refresher, which CDK derives from the function's full construct path (docs/deploying.md).
     */
    const comparable = (template: Template) =>
      JSON.parse(
        JSON.stringify(template.toJSON())
          .replace(/"S3Key":"[0-9a-f]{64}\.zip"/g, '"S3Key":"<asset>"')
          // The vend version's logical id hashes the function's properties, that asset key among them.
          .replace(/VendCurrentVersion[0-9a-f]{40}/g, 'VendCurrentVersion<asset>')
          .replace(/"ScheduleRuleAllowEventRule\w+"/g, '"ScheduleRuleAllowEventRule<path>"'),
      );
    const standalone = createBrokerApp({ context: SKIP_BUNDLING }).stacks;
    expect(stack.uatStage.stack.stackName).toBe('TokenBroker-uat');
    expect(stack.prodStage.stack.stackName).toBe('TokenBroker-prod');
    for (const inPipeline of [stack.uatStage.stack, stack.prodStage.stack]) {
      const alone = standalone.find((s) => s.stackName === inPipeline.stackName);
      expect(alone, inPipeline.stackName).toBeDefined();
      const templates = [inPipeline, alone as never].map((s) => comparable(Template.fromStack(s)));
      expect(
        Object.keys(templates[0].Resources).filter((id: string) => id.startsWith('ScheduleRuleAllow')),
      ).toHaveLength(1);
      expect(templates[0]).toEqual(templates[1]);
    }
  }, 120_000);
});

describe('cdk-nag on the pipeline', () => {
  it('leaves no finding unacknowledged, and every acknowledgement gives its reason', () => {
    expect(new AwsSolutionsChecks().validateScope(app).violations).toEqual([]);
    const acknowledgements = stack.node
      .findAll()
      .flatMap((c) => c.node.metadata.filter((m) => m.type === Validations.ACKNOWLEDGED_RULES_METADATA_KEY))
      .flatMap((m) => Object.entries(m.data as Record<string, string>));
    // The artifact bucket's access logs: acknowledged with its reason, not fixed (docs/deploying.md).
    expect(acknowledgements.map(([id]) => id.replace(/^Annotation::/, ''))).toContain('AwsSolutions-S1');
    for (const [id, reason] of acknowledgements) expect(reason.length, id).toBeGreaterThan(80);
  });
});

describe('pipeline configuration', () => {
  const stageConfigs = STAGES.map(parseStageConfig);
  const failure = (change: Partial<PipelineInput>): string => {
    try {
      parsePipelineConfig({ ...structuredClone(committed), ...change }, stageConfigs);
    } catch (error) {
      if (error instanceof ConfigurationError) return error.message;
      throw error;
    }
    throw new Error('the pipeline was accepted');
  };

  it('accepts the committed placeholders', () => {
    expect(parsePipelineConfig(committed, stageConfigs).pipeline.account).toBe('444444444444');
  });

  it.each([
    [{ account: '4444' }, 'pipeline.account: a 12-digit AWS account id'],
    [{ connectionArn: 'my-github' }, 'pipeline.connectionArn: a CodeConnections connection ARN'],
    [{ repository: 'token-broker' }, 'pipeline.repository: owner/name'],
    [{ prodStage: 'production' }, 'pipeline.prodStage: unknown stage "production"; known: uat, prod'],
    [{ uatStage: 'prod', prodStage: 'uat' }, 'pipeline.uatStage: stage "prod" serves the vendor\'s "prod"'],
    [
      {
        smokeTest: { credentialSet: 'uat-execution', roleName: 'token-broker-pipeline-smoke-test' },
      },
      'pipeline.smokeTest.roleName: arn:aws:iam::444444444444:role/token-broker-pipeline-smoke-test must be a consumer of stage "uat" allowed "uat-execution"',
    ],
    [
      { smokeTest: { credentialSet: 'uat-advisor', roleName: 'someone-else' } },
      'pipeline.smokeTest.roleName: arn:aws:iam::444444444444:role/someone-else must be a consumer',
    ],
  ] as [Partial<PipelineInput>, string][])('refuses %j, naming the field', (change, expected) => {
    expect(failure(change)).toContain(expected);
  });

  it('is needed only with -c pipeline=true: the stages synthesize without it', () => {
    const broken = { ...committed, connectionArn: 'not-an-arn' };
    expect(createBrokerApp({ context: SKIP_BUNDLING, pipeline: broken }).stacks).toHaveLength(2);
    expect(() =>
      createBrokerApp({ context: { ...SKIP_BUNDLING, pipeline: 'true' }, pipeline: broken }),
    ).toThrow(/invalid pipeline: pipeline\.connectionArn/);
  }, 120_000);
});
