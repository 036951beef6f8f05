import { CloudFormationServiceException, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { type ServingStack, servingStacks } from '../infra/stack-names.js';
import { StackLookupError, UsageError } from './errors.js';
import type { CliIo } from './io.js';
import { stageOption } from './stage-source.js';

/** The stack output that is a serving stack's broker URL (infra/broker-stack.ts). */
const VEND_URL_OUTPUT = 'VendUrl';

/**
 * The serving stack `--stage` means: the only one of a one-Region stage; of a two-Region stage, home's, or the
 * one in `--region` (each Region's broker has its own URL).
 */
function servingStackOf(command: string, stageName: string, stacks: ServingStack[], region?: string) {
  const stack = region === undefined ? stacks[0] : stacks.find((s) => s.region === region);
  if (!stack) {
    throw new UsageError(
      `stage "${stageName}" serves from ${stacks.map((s) => s.region).join(' and ')}, not --region ${region}`,
      command,
    );
  }
  return stack;
}

/**
 * The broker URL of a deployed stage: the `VendUrl` output of its serving stack (TokenBroker-<stage>), read with
 * DescribeStacks in the stack's Region with the operator's own AWS credentials. The stage is one of infra/stages/
 * or a JSON stage file, as for the other commands: its name and Region say which stack, where.
 */
export async function stageVendUrl(
  command: string,
  io: CliIo,
  nameOrPath: string,
  region: string | undefined,
): Promise<string> {
  const stage = stageOption(command, nameOrPath, io.cwd);
  const { stackName, region: stackRegion } = servingStackOf(
    command,
    stage.name,
    servingStacks(stage),
    region,
  );
  const client = await io.cloudFormation(stackRegion);
  let outputs: { OutputKey?: string | undefined; OutputValue?: string | undefined }[] | undefined;
  let status: string | undefined;
  try {
    const [stack] = (await client.send(new DescribeStacksCommand({ StackName: stackName }))).Stacks ?? [];
    outputs = stack?.Outputs;
    status = stack?.StackStatus;
  } catch (error) {
    throw lookupFailure(error, stackName, stackRegion, stage);
  } finally {
    client.destroy();
  }
  const url = outputs?.find((output) => output.OutputKey === VEND_URL_OUTPUT)?.OutputValue;
  if (!url) {
    throw new StackLookupError(
      'NO_VEND_URL',
      `stack ${stackName} in ${stackRegion} has no ${VEND_URL_OUTPUT} output${status ? ` (its status: ${status})` : ''}: is it the stage's serving stack, deployed to the end?`,
    );
  }
  io.stderr.write(
    `token-broker ${command}: stage ${stage.name}: ${VEND_URL_OUTPUT} of stack ${stackName} in ${stackRegion}\n`,
  );
  return url;
}

/**
 * DescribeStacks' failure as the CLI says it: a stack that is not there (CloudFormation answers a
 * ValidationException "does not exist") names the stack, the Region and the account it belongs to; any other
 * names the service's error only (its message may quote the caller's ARN). No credentials at all stays the SDK's
 * CredentialsProviderError, which every command says the same way.
 */
function lookupFailure(
  error: unknown,
  stackName: string,
  region: string,
  stage: { name: string; account: string },
): unknown {
  if (!(error instanceof CloudFormationServiceException)) {
    if (error instanceof Error && error.name === 'CredentialsProviderError') return error;
    return new StackLookupError('NETWORK_ERROR', `CloudFormation in ${region} could not be reached`, {
      cause: error,
    });
  }
  if (error.name === 'ValidationException' && /does not exist/.test(error.message)) {
    return new StackLookupError(
      'STACK_NOT_FOUND',
      `stack ${stackName} does not exist in ${region}: is stage "${stage.name}" deployed, and are these credentials of its account ${stage.account}?`,
    );
  }
  return new StackLookupError(
    error.name,
    `DescribeStacks of ${stackName} in ${region} failed (${error.name}); the operator needs cloudformation:DescribeStacks`,
  );
}
