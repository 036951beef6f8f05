import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ConfigurationError } from '../shared/errors.js';
import { BrokerStack, type BrokerStackProps, stackName } from './broker-stack.js';
import { parseStageConfig, type StageInput } from './stage-config.js';
import { STAGES } from './stages/index.js';

export interface BrokerAppOptions {
  stages?: readonly StageInput[];
  /** CDK context, e.g. `{ stage: 'uat' }` or `{ 'aws:cdk:bundling-stacks': [] }` in tests. */
  context?: Record<string, unknown>;
  entries?: BrokerStackProps['entries'];
  outdir?: string;
}

/**
 * The CDK app: one stack per stage (all of them, or only `-c stage=<name>`), every stage validated first, and
 * cdk-nag's AwsSolutions checks run at synth, where any unacknowledged finding fails it.
 */
export function createBrokerApp(options: BrokerAppOptions = {}): { app: App; stacks: BrokerStack[] } {
  const app = new App({ context: options.context, outdir: options.outdir });
  const configs = (options.stages ?? STAGES).map(parseStageConfig);
  const selected = app.node.tryGetContext('stage') as string | undefined;
  if (selected !== undefined && !configs.some((stage) => stage.name === selected)) {
    const known = configs.map((stage) => stage.name).join(', ');
    throw new ConfigurationError(`unknown stage "${selected}"; known: ${known}`);
  }
  const stacks = configs
    .filter((stage) => selected === undefined || stage.name === selected)
    .map((stage) => new BrokerStack(app, stackName(stage), { stage, entries: options.entries }));
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, stacks };
}
