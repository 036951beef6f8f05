import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type CfnOutput, DefaultStackSynthesizer, Duration, Stack, Stage, Validations } from 'aws-cdk-lib';
import { LinuxBuildImage } from 'aws-cdk-lib/aws-codebuild';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import {
  CodeBuildStep,
  CodePipeline,
  CodePipelineSource,
  ManualApprovalStep,
  ShellStep,
} from 'aws-cdk-lib/pipelines';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { Construct, IConstruct } from 'constructs';
import { BrokerStack, type BrokerStackProps, stackName } from './broker-stack.js';
import type { PipelineConfig } from './pipeline-config.js';
import type { StageConfig } from './stage-config.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export const PIPELINE_STACK_NAME = 'TokenBroker-pipeline';
/** Where `npm run synth:pipeline` writes the pipeline's cloud assembly (cdk.out stays the stages'). */
export const PIPELINE_ASSEMBLY_DIR = 'cdk.pipeline.out';

/** The asset publisher the pipeline installs (`npm install -g cdk-assets@…`); not a dependency of the project. */
export const CDK_ASSETS_VERSION = '4.7.3';

/**
 * The commands of the pipeline's synth step: exactly CI's run (`.ci/run`: Java for DynamoDB Local when the image
 * lacks it, `npm ci`, `npm test`, typecheck, lint, both synths), whose pipeline synth is the step's output.
 */
export const SYNTH_COMMANDS = ['bash .ci/run'];

/** The CDK CLI the pipeline's self-mutation and asset steps install: the one package.json pins. */
function pinnedCliVersion(): string {
  const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
    devDependencies: Record<string, string>;
  };
  const version = pkg.devDependencies['aws-cdk'];
  if (!version) throw new Error('package.json pins no aws-cdk');
  return version;
}

/**
 * One stage of the broker as the pipeline deploys it: the same BrokerStack, under the same CloudFormation
 * stack name as a manual `cdk deploy` (`TokenBroker-<stage>`), so the pipeline updates the existing stack
 * and its tables rather than creating new ones.
 */
export class BrokerStage extends Stage {
  readonly stack: BrokerStack;

  constructor(
    scope: Construct,
    id: string,
    props: { stage: StageConfig; entries?: BrokerStackProps['entries'] },
  ) {
    super(scope, id, { env: { account: props.stage.account, region: props.stage.region } });
    const name = stackName(props.stage);
    this.stack = new BrokerStack(this, name, { stage: props.stage, stackName: name, entries: props.entries });
  }

  /** The stack's `VendUrl` output: the smoke test's target. */
  get vendUrl(): CfnOutput {
    return this.stack.node.findChild('VendUrl') as CfnOutput;
  }
}

export interface PipelineStackProps {
  pipeline: PipelineConfig;
  uat: StageConfig;
  prod: StageConfig;
  entries?: BrokerStackProps['entries'];
}

/**
 * The deployment pipeline (CDK Pipelines): source from the Git host through a CodeConnections connection;
 * a synth step running CI's checks and the synth; the UAT stage; a smoke test fetching one UAT token with
 * the operator CLI; a `cdk diff` of prod for the approver; a manual approval; the prod stage. Each stage is
 * deployed by CloudFormation change sets through the bootstrap roles of its account, which trust the
 * pipeline's account (`cdk bootstrap --trust`).
 */
export class PipelineStack extends Stack {
  readonly codePipeline: CodePipeline;
  readonly uatStage: BrokerStage;
  readonly prodStage: BrokerStage;
  readonly smokeTest: CodeBuildStep;
  readonly prodDiff: CodeBuildStep;
  readonly approval: ManualApprovalStep;

  constructor(scope: Construct, id: string, props: PipelineStackProps) {
    const { pipeline, uat, prod } = props;
    super(scope, id, {
      env: { account: pipeline.account, region: pipeline.region },
      description:
        'token-broker: the pipeline that deploys UAT, smoke-tests it, and deploys prod after approval',
      tags: { service: 'token-broker', stage: 'pipeline' },
    });

    const source = CodePipelineSource.connection(pipeline.repository, pipeline.branch, {
      connectionArn: pipeline.connectionArn,
      triggerOnPush: true,
      // A git clone with its history, not a zip of the files: `npm test` runs release N-1's ledger beside this
      // one, taken from git (test/ledger-releases.test.ts), and fails without it.
      codeBuildCloneOutput: true,
    });
    const synth = new ShellStep('Synth', {
      input: source,
      env: { CDK_DISABLE_CLI_TELEMETRY: 'true' },
      commands: SYNTH_COMMANDS,
      primaryOutputDirectory: PIPELINE_ASSEMBLY_DIR,
    });
    this.codePipeline = new CodePipeline(this, 'Pipeline', {
      pipelineName: 'TokenBroker',
      synth,
      // The stages are in other accounts: the artifacts are encrypted with a key they may use.
      crossAccountKeys: true,
      enableKeyRotation: true,
      cliVersion: pinnedCliVersion(),
      // Pinned like everything else the pipeline runs (CDK Pipelines installs the latest by default).
      cdkAssetsCliVersion: CDK_ASSETS_VERSION,
      codeBuildDefaults: {
        buildEnvironment: { buildImage: LinuxBuildImage.STANDARD_8_0 },
        timeout: Duration.minutes(30),
      },
    });

    this.uatStage = new BrokerStage(this, 'Uat', { stage: uat, entries: props.entries });
    const smokeRole = new Role(this, 'SmokeTestRole', {
      roleName: pipeline.smokeTest.roleName,
      assumedBy: new ServicePrincipal('codebuild.amazonaws.com'),
      description: `token-broker pipeline: the smoke test, a consumer of stage ${uat.name} (${pipeline.smokeTest.credentialSet} only)`,
    });
    // A cross-account caller of a Function URL needs its own identity policy too. The vend function's name
    // is CloudFormation's `<stack>-Vend<id>-<suffix>`; the URL's resource policy names that one function.
    const vendFunctions = `arn:aws:lambda:${uat.region}:${uat.account}:function:${stackName(uat)}-Vend*`;
    smokeRole.addToPolicy(
      new PolicyStatement({ actions: ['lambda:InvokeFunctionUrl'], resources: [vendFunctions] }),
    );
    smokeRole.addToPolicy(
      new PolicyStatement({
        actions: ['lambda:InvokeFunction'],
        resources: [vendFunctions],
        conditions: { Bool: { 'lambda:InvokedViaFunctionUrl': 'true' } },
      }),
    );
    Validations.of(smokeRole).acknowledge({
      id: `AwsSolutions-IAM5[Resource::${vendFunctions}]`,
      reason:
        "The UAT vend function's name is generated by CloudFormation (<stack>-Vend<id>-<suffix>) and not known " +
        'when this stack is synthesized; the pattern matches only functions of the UAT broker stack whose ' +
        "logical id starts with Vend, and the call also needs the URL's resource policy, which names the vend " +
        'function alone.',
    });
    this.smokeTest = new CodeBuildStep('SmokeTest', {
      input: source,
      role: smokeRole,
      envFromCfnOutputs: { VEND_URL: this.uatStage.vendUrl },
      env: { CDK_DISABLE_CLI_TELEMETRY: 'true' },
      commands: smokeTestCommands(pipeline),
    });
    this.codePipeline.addStage(this.uatStage, { post: [this.smokeTest] });

    this.prodStage = new BrokerStage(this, 'Prod', { stage: prod, entries: props.entries });
    this.prodDiff = new CodeBuildStep('ProdDiff', {
      input: source,
      additionalInputs: { [PIPELINE_ASSEMBLY_DIR]: synth },
      env: { CDK_DISABLE_CLI_TELEMETRY: 'true' },
      commands: ['npm ci', prodDiffCommand(this.prodStage)],
      // `cdk diff --no-change-set` reads the deployed template through the prod account's lookup role
      // (read-only, trusted by `cdk bootstrap --trust`): this step can read prod, not change it.
      rolePolicyStatements: [
        new PolicyStatement({ actions: ['sts:AssumeRole'], resources: [lookupRoleArn(prod)] }),
      ],
    });
    this.approval = new ManualApprovalStep('ApproveProd', {
      comment:
        `Deploy ${stackName(prod)}? UAT was deployed and its smoke test passed. Read the ProdDiff step's log ` +
        '(the cdk diff of prod) before approving.',
    });
    this.approval.addStepDependency(this.prodDiff);
    this.codePipeline.addStage(this.prodStage, { pre: [this.prodDiff, this.approval] });

    // Built now (not at synth) so that the findings on what CDK Pipelines generates can be acknowledged.
    this.codePipeline.buildPipeline();
    acknowledgeGeneratedFindings(this, [this.codePipeline, smokeRole]);
  }
}

/**
 * What CDK Pipelines writes into its own resources that cdk-nag flags, by kind, and why each is accepted.
 * Each names only resources of this pipeline (its artifact bucket and key, its CodeBuild projects' logs and
 * reports, the CDK bootstrap roles of its account). A finding matching none of them stays a finding and fails
 * the synth.
 */
const GENERATED_FINDINGS: { finding: RegExp; path?: RegExp; reason: string }[] = [
  {
    finding: /^AwsSolutions-S1$/,
    path: /\/ArtifactsBucket\/Resource$/,
    reason:
      "The pipeline's artifact bucket holds only the source, the synthesized assembly and step outputs, " +
      'encrypted with the rotating pipeline key, public access blocked and TLS enforced by CDK Pipelines; it is ' +
      'read and written only by the pipeline roles, whose calls CloudTrail records. Server access logs would ' +
      'need a second bucket holding logs of build traffic nobody reads.',
  },
  {
    finding: /^AwsSolutions-IAM5\[Action::s3:(Abort|DeleteObject|GetBucket|GetObject|List)\*\]$/,
    reason:
      "CDK Pipelines' read (and, for steps with outputs, write) grant on the pipeline's own artifact bucket " +
      '(Bucket.grantRead/grantReadWrite): the statement names that bucket and its objects only.',
  },
  {
    finding: /^AwsSolutions-IAM5\[Resource::<PipelineArtifactsBucket[0-9A-F]{8}\.Arn>\/\*\]$/,
    reason:
      "The objects of the pipeline's own artifact bucket: artifacts are objects under keys generated per " +
      'execution, so no narrower resource exists.',
  },
  {
    finding: /^AwsSolutions-IAM5\[Action::kms:(GenerateDataKey|ReEncrypt)\*\]$/,
    reason:
      "The artifact bucket's encryption (crossAccountKeys): the statement names the pipeline's one artifact " +
      'key; GenerateDataKey* and ReEncrypt* are what S3 needs to write objects under it for the role.',
  },
  {
    finding:
      /^AwsSolutions-IAM5\[Resource::arn:aws:(logs:[a-z0-9-]+:\d{12}:log-group:\/aws\/codebuild\/(<\w+>:\*|\*)|codebuild:[a-z0-9-]+:\d{12}:report-group\/(<\w+>-\*|\*))\]$/,
    reason:
      "A CodeBuild project's own log group (a stream per build) and report groups (named after the project): " +
      "CodeBuild's standard project role. For the asset role, the per-asset projects CDK Pipelines creates are " +
      'not known when the policy is written, so it names /aws/codebuild/* and report-group/* of this account.',
  },
  {
    finding: /^AwsSolutions-IAM5\[Resource::arn:\*:iam::\d{12}:role\/\*\]$/,
    path: /\/SelfMutation\//,
    reason:
      'Self-mutation deploys the pipeline stack through the CDK bootstrap roles of its own account: sts:AssumeRole ' +
      'on roles of this account, conditioned on the bootstrap tag aws-cdk:bootstrap-role (deploy, file- and ' +
      'image-publishing), so no other role can be assumed.',
  },
  {
    finding: /^AwsSolutions-IAM5\[Resource::\*\]$/,
    path: /\/SelfMutation\//,
    reason:
      'Self-mutation reads stack status (cloudformation:DescribeStacks) and lists buckets by name (s3:ListBucket) ' +
      'for `cdk deploy`: read-only actions that take no narrower resource before the stack exists.',
  },
  {
    finding: /^AwsSolutions-IAM5\[Resource::\*\]$/,
    path: /\/Assets\/FileRole\//,
    reason:
      'The asset role starts, watches and stops the asset-publishing CodeBuild builds ' +
      '(codebuild:StartBuild/BatchGetBuilds/StopBuild), whose projects CDK Pipelines creates per asset.',
  },
];

/** Acknowledges, with its reason, each GENERATED_FINDINGS finding on a resource inside one of `scopes`. */
function acknowledgeGeneratedFindings(stack: Stack, scopes: IConstruct[]): void {
  const byPath = new Map(stack.node.findAll().map((c) => [c.node.path, c]));
  for (const violation of new AwsSolutionsChecks().validateScope(stack).violations) {
    for (const { constructPath } of violation.violatingResources) {
      if (constructPath === undefined) continue;
      if (!scopes.some((scope) => constructPath.startsWith(`${scope.node.path}/`))) continue;
      const known = GENERATED_FINDINGS.find(
        (k) => k.finding.test(violation.ruleName) && (k.path === undefined || k.path.test(constructPath)),
      );
      const construct = byPath.get(constructPath);
      if (known && construct)
        Validations.of(construct).acknowledge({ id: violation.ruleName, reason: known.reason });
    }
  }
}

/**
 * One UAT token through the Function URL, as a consumer gets it; the token goes to /dev/null so that it never
 * reaches the build log, and the exit code decides. Then the status of the sets this role may see.
 */
export function smokeTestCommands(pipeline: PipelineConfig): string[] {
  return [
    'npm ci',
    `npx token-broker token ${pipeline.smokeTest.credentialSet} --url "$VEND_URL" > /dev/null`,
    'npx token-broker status --url "$VEND_URL"',
  ];
}

/** The prod stage's diff, from the cloud assembly the synth step built (the one the pipeline deploys). */
export function prodDiffCommand(prodStage: BrokerStage): string {
  return `npx cdk diff --app ${PIPELINE_ASSEMBLY_DIR}/${prodStage.artifactId} --no-change-set`;
}

/** The CDK bootstrap's lookup role of a stage's account and Region (default qualifier). */
export function lookupRoleArn(stage: StageConfig): string {
  return `arn:aws:iam::${stage.account}:role/cdk-${DefaultStackSynthesizer.DEFAULT_QUALIFIER}-lookup-role-${stage.account}-${stage.region}`;
}
