import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { createBrokerApp } from '../infra/broker-app.js';
import { REFRESHER_RESERVED_CONCURRENCY } from '../infra/function-sizing.js';
import { parseStageConfig, type StageInput } from '../infra/stage-config.js';
import { STAGES } from '../infra/stages/index.js';
import { prod } from '../infra/stages/prod.js';
import { uat } from '../infra/stages/uat.js';
import { ConfigurationError } from '../shared/errors.js';
import {
  type Deployed,
  type Json,
  refOf,
  SKIP_BUNDLING,
  stageOf,
  synthesizeStages,
} from './support/infra-template.js';

let deployed: Record<string, Deployed> = {};

// Synthesizing both stages takes seconds, and longer on a loaded machine: a generous bound, not a measurement.
beforeAll(() => {
  ({ deployed } = synthesizeStages());
}, 180_000);

/** A stage's template, built from a changed copy of a committed stage (bundling skipped). */
function templateOf(base: StageInput, change: (stage: StageInput & Record<string, unknown>) => void) {
  const copy = structuredClone(base) as StageInput & Record<string, unknown>;
  change(copy);
  const { stacks } = createBrokerApp({ stages: [copy], context: SKIP_BUNDLING });
  const [stack] = stacks;
  if (!stack) throw new Error('no stack');
  return Template.fromStack(stack).toJSON() as Deployed['json'];
}

function failureOf(input: StageInput): string {
  try {
    parseStageConfig(input);
  } catch (error) {
    if (error instanceof ConfigurationError) return error.message;
    throw error;
  }
  throw new Error('the stage was accepted');
}

const ofType = (json: Deployed['json'], type: string) =>
  Object.entries(json.Resources).filter(([, r]) => r.Type === type);

/** Rollouts: versions, the alias behind the URL, CodeDeploy with rollback alarms, concurrency, event age. */
describe.each(STAGES.map((s) => s.name))('stage %s', (name) => {
  const d = () => stageOf(deployed, name);

  it('serves the Function URL from the `live` alias of a published vend version, not from $LATEST', () => {
    const { json, ids } = d();
    const versions = ofType(json, 'AWS::Lambda::Version');
    expect(versions.map(([, v]) => refOf(v.Properties.FunctionName))).toEqual([ids.vend]);
    const aliases = ofType(json, 'AWS::Lambda::Alias');
    expect(aliases.map(([, a]) => [refOf(a.Properties.FunctionName), a.Properties.Name])).toEqual([
      [ids.vend, 'live'],
    ]);
    const [, alias] = aliases[0] ?? [];
    expect(refOf(alias?.Properties.FunctionVersion)).toBe(versions[0]?.[0]);
    const urls = ofType(json, 'AWS::Lambda::Url');
    expect(urls.map(([, u]) => [refOf(u.Properties.TargetFunctionArn), u.Properties.Qualifier])).toEqual([
      [ids.vend, 'live'],
    ]);
  });

  it('shifts the alias with CodeDeploy gradually, rolling back on failure and on the vend alarms', () => {
    const { json } = d();
    const [aliasEntry] = ofType(json, 'AWS::Lambda::Alias');
    const aliasResource = aliasEntry?.[1] as
      | { UpdatePolicy?: { CodeDeployLambdaAliasUpdate?: Json } }
      | undefined;
    const update = aliasResource?.UpdatePolicy?.CodeDeployLambdaAliasUpdate;
    const groups = ofType(json, 'AWS::CodeDeploy::DeploymentGroup');
    expect(groups).toHaveLength(1);
    const [groupId, group] = groups[0] ?? [];
    expect(refOf(update?.DeploymentGroupName)).toBe(groupId);
    expect(refOf(update?.ApplicationName)).toBe(refOf(group?.Properties.ApplicationName));
    const props = group?.Properties ?? {};
    expect(props.DeploymentConfigName).toBe('CodeDeployDefault.LambdaCanary10Percent10Minutes');
    expect(props.AutoRollbackConfiguration).toEqual({
      Enabled: true,
      Events: expect.arrayContaining(['DEPLOYMENT_FAILURE', 'DEPLOYMENT_STOP_ON_ALARM']),
    });
    const config = props.AlarmConfiguration as { Enabled: boolean; Alarms: { Name: unknown }[] };
    expect(config.Enabled).toBe(true);
    const names = config.Alarms.map(
      (a) => json.Resources[refOf(a.Name) ?? '']?.Properties.AlarmName as string | undefined,
    );
    const prefix = `TokenBroker-${name}-`;
    expect(names.sort()).toEqual(
      [
        'vend-errors',
        'vend-5xx-ledger-unavailable',
        'vend-5xx-token-unavailable',
        'vend-5xx-internal-error',
        'vend-latency-p99',
      ]
        .map((suffix) => prefix + suffix)
        .sort(),
    );
  });

  it('reserves concurrency for the refresher, and leaves vend in the shared pool unless the stage caps it', () => {
    const { json, ids } = d();
    expect(json.Resources[ids.refresher]?.Properties.ReservedConcurrentExecutions).toBe(
      REFRESHER_RESERVED_CONCURRENCY,
    );
    expect(REFRESHER_RESERVED_CONCURRENCY).toBeGreaterThanOrEqual(2);
    expect(json.Resources[ids.vend]?.Properties.ReservedConcurrentExecutions).toBeUndefined();
  });

  it("drops a scheduled event older than one schedule period from the refresher's async queue, without retries", () => {
    const { json, ids, stage } = d();
    const configs = ofType(json, 'AWS::Lambda::EventInvokeConfig').map(([, c]) => c.Properties);
    expect(configs).toEqual([
      {
        FunctionName: { Ref: ids.refresher },
        Qualifier: '$LATEST',
        MaximumEventAgeInSeconds: stage.refreshScheduleMinutes * 60,
        MaximumRetryAttempts: 0,
      },
    ]);
  });
});

describe('rollout settings of a stage', () => {
  it('takes the deployment configuration from the stage; all at once only outside production', () => {
    const linear = templateOf(uat, (s) =>
      Object.assign(s, { rollout: { vendDeployment: 'LINEAR_10PERCENT_EVERY_1MINUTE' } }),
    );
    const allAtOnce = templateOf(uat, (s) =>
      Object.assign(s, { rollout: { vendDeployment: 'ALL_AT_ONCE' } }),
    );
    const configOf = (json: Deployed['json']) =>
      ofType(json, 'AWS::CodeDeploy::DeploymentGroup')[0]?.[1].Properties.DeploymentConfigName;
    expect(configOf(linear)).toBe('CodeDeployDefault.LambdaLinear10PercentEvery1Minute');
    expect(configOf(allAtOnce)).toBe('CodeDeployDefault.LambdaAllAtOnce');
    const prodAllAtOnce = structuredClone(prod) as StageInput;
    Object.assign(prodAllAtOnce, { rollout: { vendDeployment: 'ALL_AT_ONCE' } });
    expect(failureOf(prodAllAtOnce)).toContain(
      'prod.rollout.vendDeployment: a production stage deploys gradually',
    );
    const unknown = structuredClone(uat) as StageInput;
    Object.assign(unknown, { rollout: { vendDeployment: 'CANARY_50PERCENT_1MINUTE' } });
    expect(failureOf(unknown)).toContain('uat.rollout.vendDeployment');
  }, 120_000);

  it("makes a stage's vend cap vend's reserved concurrency, and refuses caps that are not sane", () => {
    const capped = templateOf(prod, (s) => Object.assign(s, { rollout: { vendReservedConcurrency: 50 } }));
    const [vendId] =
      ofType(capped, 'AWS::Lambda::Function').find(([, f]) =>
        f.Properties.Description?.toString().includes('vends'),
      ) ?? [];
    expect(capped.Resources[vendId ?? '']?.Properties.ReservedConcurrentExecutions).toBe(50);
    for (const cap of [0, -1, 2.5, 5000, '50']) {
      const input = structuredClone(prod) as StageInput;
      Object.assign(input, { rollout: { vendReservedConcurrency: cap } });
      expect(failureOf(input), String(cap)).toContain('prod.rollout.vendReservedConcurrency');
    }
  }, 120_000);
});
