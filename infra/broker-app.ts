import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ConfigurationError } from '../shared/errors.js';
import { BrokerStack, type BrokerStackProps, stackName } from './broker-stack.js';
import { type PipelineInput, parsePipelineConfig } from './pipeline-config.js';
import { PIPELINE_STACK_NAME, PipelineStack } from './pipeline-stack.js';
import { createRegionStacks, type RegionStacks } from './regions-app.js';
import { parseStageConfig, type StageInput } from './stage-config.js';
import { EXAMPLE_STAGES, STAGES } from './stages/index.js';
import { pipeline as PIPELINE } from './stages/pipeline.js';

const CDK_JSON = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'cdk.json');

/** cdk.json's `context`: the feature flags `cdk synth` and `cdk deploy` give the app. */
export function cdkJsonContext(): Record<string, unknown> {
  return (JSON.parse(readFileSync(CDK_JSON, 'utf8')) as { context?: Record<string, unknown> }).context ?? {};
}

/**
 * A stage from a JSON file of the same shape as infra/stages/ (`cdk synth -c stageFile=stage.json`), for a
 * pipeline that generates its stage, or a scale check (infra/tools/generate-stage.ts); check-config reads the same.
 */
function readStageFile(file: string): StageInput {
  let text: string;
  try {
    text = readFileSync(path.resolve(file), 'utf8');
  } catch (cause) {
    throw new ConfigurationError(`cannot read the stage file ${path.resolve(file)}`, { cause });
  }
  try {
    return JSON.parse(text) as StageInput;
  } catch (cause) {
    throw new ConfigurationError(`the stage file ${path.resolve(file)} is not JSON`, { cause });
  }
}

export interface BrokerAppOptions {
  stages?: readonly StageInput[];
  /**
   * The context under `context`: cdk.json's by default, so that a test synthesizes what `cdk deploy` deploys
   * (the CLI gives the same values again; its own take precedence).
   */
  baseContext?: Record<string, unknown>;
  /** CDK context, e.g. `{ stage: 'uat' }` or `{ 'aws:cdk:bundling-stacks': [] }` in tests. */
  context?: Record<string, unknown>;
  entries?: BrokerStackProps['entries'];
  outdir?: string;
  /** The pipeline's configuration (infra/stages/pipeline.ts by default); used with `-c pipeline=true`. */
  pipeline?: PipelineInput;
}

/**
 * The CDK app: one stack per stage (all of them, or only `-c stage=<name>`; or the one of `-c stageFile=<json>`;
 * a stage with `regions` has five, infra/regions-app.ts),
 * every stage validated first, and
 * cdk-nag's AwsSolutions checks run at synth, where any unacknowledged finding fails it. With
 * `-c pipeline=true`, the app is the pipeline stack alone (`TokenBroker-pipeline`), the stages inside it.
 */
export function createBrokerApp(options: BrokerAppOptions = {}): {
  app: App;
  /** Every serving stack (a two-Region stage has two). */
  stacks: BrokerStack[];
  pipeline?: PipelineStack;
  /** The stacks of each two-Region stage. */
  regions?: RegionStacks[];
} {
  const context = { ...(options.baseContext ?? cdkJsonContext()), ...options.context };
  const app = new App({ context, outdir: options.outdir });
  const stageFile = app.node.tryGetContext('stageFile') as string | undefined;
  const configs = (options.stages ?? (stageFile ? [readStageFile(stageFile)] : STAGES)).map(parseStageConfig);
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  if (String(app.node.tryGetContext('pipeline')) === 'true') {
    const { pipeline, uat, prod } = parsePipelineConfig(options.pipeline ?? PIPELINE, configs);
    const stack = new PipelineStack(app, PIPELINE_STACK_NAME, {
      pipeline,
      uat,
      prod,
      entries: options.entries,
    });
    return { app, stacks: [stack.uatStage.stack, stack.prodStage.stack], pipeline: stack };
  }
  const selected = app.node.tryGetContext('stage') as string | undefined;
  // An example stage is built only when named, and only from the project's own stages.
  const example = EXAMPLE_STAGES.find((stage) => stage.name === selected);
  if (example && !options.stages && !stageFile && !configs.some((stage) => stage.name === selected)) {
    configs.push(parseStageConfig(example));
  }
  if (selected !== undefined && !configs.some((stage) => stage.name === selected)) {
    const known = configs.map((stage) => stage.name).join(', ');
    throw new ConfigurationError(`unknown stage "${selected}"; known: ${known}`);
  }
  const stacks: BrokerStack[] = [];
  const regions: RegionStacks[] = [];
  for (const stage of configs.filter((stage) => selected === undefined || stage.name === selected)) {
    if (stage.regions) {
      const built = createRegionStacks(app, stage, stage.regions, options.entries);
      regions.push(built);
      stacks.push(built.home, built.peer);
    } else {
      stacks.push(new BrokerStack(app, stackName(stage), { stage, entries: options.entries }));
    }
  }
  return { app, stacks, regions };
}
