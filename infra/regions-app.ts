import type { App } from 'aws-cdk-lib';
import { BrokerStack, type BrokerStackProps, stackName } from './broker-stack.js';
import {
  GlobalKeyReplicaStack,
  GlobalKeyStack,
  GlobalTableStack,
  globalStackNames,
  globalTableName,
} from './global-stacks.js';
import type { RegionsSettings } from './mrsc-regions.js';
import { refresherRoleName } from './role-names.js';
import { peerBrokerStackName } from './stack-names.js';
import type { StageConfig } from './stage-config.js';

/** Every stack of a two-Region stage (docs/deploying.md, Two Regions), in deployment order. */
export interface RegionStacks {
  key: GlobalKeyStack;
  keyReplica: GlobalKeyReplicaStack;
  global: GlobalTableStack;
  home: BrokerStack;
  peer: BrokerStack;
}

/** The peer's serving stack: its own name, as dashboards are global to the account and stack names show it. */
export const peerStackName = (stage: StageConfig, regions: RegionsSettings): string =>
  peerBrokerStackName(stage.name, regions.peer);

/**
 * A two-Region stage: the key, its replica, the MRSC table with the secrets, then a serving stack in each Region
 * (the broker as in a one-Region stage, with its own ledger table, plus the lease renewer; its tokens are the
 * MRSC table's, shared by both Regions). The
 * home serving stack keeps the stage's stack name, so a one-Region stage that gains a peer keeps its stack.
 *
 * References: the primary key's ARN crosses Regions once, to its replica (a weak reference, Fn::GetStackOutput:
 * see GlobalKeyReplicaStack); everything else is named or derived without a reference across Regions (the table
 * by its fixed name, the replica key's ARN from the primary's key id, which a replica shares), so the serving
 * stacks use references within their own Region only. Where a name stands in for a reference, the deployment
 * order is an explicit dependency.
 */
export function createRegionStacks(
  app: App,
  stage: StageConfig,
  regions: RegionsSettings,
  entries?: BrokerStackProps['entries'],
): RegionStacks {
  const names = globalStackNames(stage);
  const key = new GlobalKeyStack(app, names.key, { stage, regions });
  // Weak references (Fn::GetStackOutput, cdk.json) order nothing by themselves: every reference between these
  // stacks is also an explicit dependency, so that `cdk deploy --all` deploys a producer before its consumers.
  const keyReplica = new GlobalKeyReplicaStack(app, names.keyReplica, { stage, regions, primary: key.key });
  keyReplica.addStackDependency(key, "the replica key reads the primary's ARN");
  const global = new GlobalTableStack(app, names.table, { stage, regions, primary: key.key });
  global.addStackDependency(key, 'the table and the secrets are encrypted with the primary key');
  // The table's and the secrets' replicas in the peer are encrypted with the replica key: it must exist first.
  global.addStackDependency(keyReplica, 'its replicas in the peer use the replica key');
  const tableName = globalTableName(stage);
  const home = new BrokerStack(app, stackName(stage), {
    stage,
    entries,
    regional: {
      ownRegion: regions.home,
      otherRegion: regions.peer,
      globalTableName: tableName,
      keyArn: key.key.keyArn,
    },
  });
  home.addStackDependency(key, 'the refresher and the renewer decrypt with the primary key');
  home.addStackDependency(global, 'the lease renewer and the token functions name the global table');
  const peer = new BrokerStack(app, peerStackName(stage, regions), {
    stage,
    entries,
    name: peerStackName(stage, regions),
    region: regions.peer,
    refresherRoleName: refresherRoleName(stage.name, regions.peer),
    regional: {
      ownRegion: regions.peer,
      otherRegion: regions.home,
      globalTableName: tableName,
      keyArn: keyReplica.keyArn,
    },
  });
  peer.addStackDependency(keyReplica, 'the refresher and the renewer decrypt with the replica key');
  peer.addStackDependency(
    global,
    'the lease renewer and the token functions name the global table, the refresher the secret replicas',
  );
  return { key, keyReplica, global, home, peer };
}
