import {
  CloudFormationClient,
  CloudFormationServiceException,
  DescribeStacksCommand,
} from '@aws-sdk/client-cloudformation';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import type { ManualClock } from '../shared/clock.js';
import { type CliBroker, cliBrokerPerFile, runIn } from './support/cli-harness.js';

/**
 * `--stage`: the broker of a deployed stage, its URL read from its stack's VendUrl output. CloudFormation has no
 * local stand-in: aws-sdk-client-mock answers DescribeStacks with the local broker's URL as the output, and the
 * commands then talk to that broker for real (SigV4 in Region "local", from AWS_REGION).
 */
const cloudFormation = mockClient(CloudFormationClient);
let b: CliBroker;
let clock: ManualClock;
/** The Regions the CLI built a CloudFormation client for. */
const regions: string[] = [];
const factory = (region: string) => {
  regions.push(region);
  return new CloudFormationClient({
    region,
    credentials: { accessKeyId: 'AKIATEST', secretAccessKey: 'test' },
  });
};
const cli = (argv: string[], env: NodeJS.ProcessEnv = {}) =>
  runIn(argv, { env: { ...b.env, TOKEN_BROKER_URL: undefined, ...env }, clock, cloudFormation: factory });

const deployed = (outputs: { OutputKey: string; OutputValue: string }[]) => ({
  Stacks: [
    {
      StackName: 'TokenBroker-uat',
      StackStatus: 'UPDATE_COMPLETE' as const,
      CreationTime: new Date(0),
      Outputs: outputs,
    },
  ],
});

const notFound = (stack: string) =>
  new CloudFormationServiceException({
    name: 'ValidationException',
    $fault: 'client',
    $metadata: {},
    message: `Stack with id ${stack} does not exist`,
  });

cliBrokerPerFile((started) => {
  b = started;
  clock = started.clock as ManualClock;
});

beforeEach(() => {
  cloudFormation.reset();
  regions.length = 0;
  cloudFormation
    .on(DescribeStacksCommand, { StackName: 'TokenBroker-uat' })
    .resolves(deployed([{ OutputKey: 'VendUrl', OutputValue: b.broker.vendUrl }]));
});

describe('--stage', () => {
  it('status and token ask the broker at the VendUrl output of TokenBroker-<stage>, in the stage’s Region', async () => {
    const status = await cli(['status', '--stage', 'uat']);
    expect(status.exit, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^uat-advisor\s+HEALTHY\s/m);
    expect(status.stderr).toContain(
      'token-broker status: stage uat: VendUrl of stack TokenBroker-uat in eu-west-1\n',
    );
    expect(regions).toEqual(['eu-west-1']);

    const token = await cli(['token', 'uat-advisor', '--stage', 'uat']);
    expect(token.exit, token.stderr).toBe(0);
    expect(token.stdout).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+\n$/);
    expect(cloudFormation.commandCalls(DescribeStacksCommand).map((c) => c.args[0].input)).toEqual([
      { StackName: 'TokenBroker-uat' },
      { StackName: 'TokenBroker-uat' },
    ]);
  });

  it('--url comes before --stage, and --stage before TOKEN_BROKER_URL', async () => {
    const url = await cli(['status', '--url', b.broker.vendUrl, '--stage', 'uat']);
    expect(url.exit, url.stderr).toBe(0);
    expect(cloudFormation.commandCalls(DescribeStacksCommand)).toHaveLength(0);

    const stage = await cli(['status', '--stage', 'uat'], { TOKEN_BROKER_URL: 'http://127.0.0.1:9' });
    expect(stage.exit, stage.stderr).toBe(0);
    expect(stage.stderr).toContain(`asking ${b.broker.vendUrl} `);
  });

  it('a two-Region stage: home’s stack, or with --region the peer’s, named after its Region', async () => {
    cloudFormation.on(DescribeStacksCommand).rejects(notFound('TokenBroker-prod-regions-eu-central-1'));
    const peer = await cli(['status', '--stage', 'prod-regions', '--region', 'eu-central-1']);
    expect(peer).toMatchObject({ exit: 2, stdout: '' });
    expect(peer.stderr.trimEnd().split('\n').at(-1)).toMatch(
      /^token-broker status: error STACK_NOT_FOUND: stack TokenBroker-prod-regions-eu-central-1 does not exist in eu-central-1: is stage "prod-regions" deployed, and are these credentials of its account \d{12}\?$/,
    );
    expect(regions).toEqual(['eu-central-1']);

    const elsewhere = await cli(['status', '--stage', 'prod-regions', '--region', 'us-east-1']);
    expect(elsewhere.exit).toBe(2);
    expect(elsewhere.stderr).toMatch(
      /error USAGE_ERROR: stage "prod-regions" serves from \S+ and eu-central-1, not --region us-east-1/,
    );
  });

  it('a stack that does not exist, or has no VendUrl output: a clear error, exit 2', async () => {
    cloudFormation.on(DescribeStacksCommand).rejects(notFound('TokenBroker-prod'));
    const missing = await cli(['token', 'prod-advisor', '--stage', 'prod']);
    expect(missing).toMatchObject({ exit: 2, stdout: '' });
    expect(missing.stderr).toMatch(
      /error STACK_NOT_FOUND: stack TokenBroker-prod does not exist in \S+: is stage "prod" deployed/,
    );

    cloudFormation
      .on(DescribeStacksCommand)
      .resolves(deployed([{ OutputKey: 'DashboardName', OutputValue: 'TokenBroker-uat' }]));
    const noOutput = await cli(['status', '--stage', 'uat']);
    expect(noOutput).toMatchObject({ exit: 2, stdout: '' });
    expect(noOutput.stderr).toContain(
      "error NO_VEND_URL: stack TokenBroker-uat in eu-west-1 has no VendUrl output (its status: UPDATE_COMPLETE): is it the stage's serving stack, deployed to the end?",
    );
  });

  it('CloudFormation refusing the caller: exit 3, the error’s name only', async () => {
    cloudFormation.on(DescribeStacksCommand).rejects(
      new CloudFormationServiceException({
        name: 'AccessDeniedException',
        $fault: 'client',
        $metadata: {},
        message: 'User: arn:aws:sts::123456789012:assumed-role/oncall/jane is not authorized',
      }),
    );
    const denied = await cli(['status', '--stage', 'uat']);
    expect(denied).toMatchObject({ exit: 3, stdout: '' });
    expect(denied.stderr).toContain(
      'error AccessDeniedException: DescribeStacks of TokenBroker-uat in eu-west-1 failed (AccessDeniedException); the operator needs cloudformation:DescribeStacks',
    );
    expect(denied.stderr).not.toContain('jane');
  });

  it('a stage’s file or an unknown name: what --stage takes, and which stage was meant (exit 2, nothing asked)', async () => {
    const source = await cli(['status', '--stage', 'infra/stages/uat.ts']);
    expect(source.exit).toBe(2);
    expect(source.stderr).toContain(
      'error USAGE_ERROR: --stage takes a stage name, one of uat, prod, prod-regions, or the path of a JSON stage file, not infra/stages/uat.ts: did you mean "--stage uat"?',
    );
    const misspelt = await cli(['token', 'uat-advisor', '--stage', 'uta']);
    expect(misspelt.exit).toBe(2);
    expect(misspelt.stderr).toContain('unknown stage "uta"; did you mean "uat"? --stage takes');
    expect(cloudFormation.commandCalls(DescribeStacksCommand)).toHaveLength(0);
  });
});
