import { Arn, Duration, RemovalPolicy, Stack, type StackProps, Tags, Validations } from 'aws-cdk-lib';
import { AttributeType, MultiRegionConsistency, TableEncryptionV2, TableV2 } from 'aws-cdk-lib/aws-dynamodb';
import { AccountRootPrincipal, PolicyDocument, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { CfnReplicaKey, type IKey, Key } from 'aws-cdk-lib/aws-kms';
import { CfnResourcePolicy, Secret } from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import { PARTITION_KEY } from '../shared/aws/tables.js';
import type { RegionsSettings } from './mrsc-regions.js';
import { secretResourcePolicy } from './secret-policy.js';
import type { StageConfig } from './stage-config.js';

/**
 * What a two-Region stage shares between its Regions (docs/deploying.md, Two Regions): a multi-Region KMS key
 * (primary in home, replica in peer), the MRSC table that holds the leases and the tokens (one item per set, so
 * one login per set serves both Regions), and the credential secrets replicated to the peer. Three stacks, deployed in this order:
 *
 *   1. GlobalKeyStack (home): the primary key;
 *   2. GlobalKeyReplicaStack (peer): its replica, which needs the primary's ARN (the one reference across
 *      Regions);
 *   3. GlobalTableStack (home): the table and the secrets, whose replicas in the peer need the replica key.
 *
 * One stack cannot hold 1 and 3: the replica key sits between them, so that would be a cycle.
 */

export interface RegionalStageProps extends StackProps {
  stage: StageConfig;
  regions: RegionsSettings;
}

/** The MRSC table's name: explicit, because both Regions' serving stacks name it without a reference. */
export const globalTableName = (stage: Pick<StageConfig, 'name'>): string =>
  `token-broker-${stage.name}-global`;

export const globalStackNames = (stage: Pick<StageConfig, 'name'>) => ({
  key: `TokenBroker-${stage.name}-key`,
  keyReplica: `TokenBroker-${stage.name}-key-replica`,
  table: `TokenBroker-${stage.name}-global`,
});

const tagged = (stack: Stack, stage: StageConfig): void => {
  Tags.of(stack).add('service', 'token-broker');
  Tags.of(stack).add('stage', stage.name);
};

const stackTags = (props: RegionalStageProps) => ({
  ...props.tags,
  service: 'token-broker',
  stage: props.stage.name,
});

/**
 * A multi-Region key's replica has the primary's key id (`mrk-…`) in another Region: its ARN follows from the
 * primary's without a lookup or a reference across Regions.
 */
export function replicaKeyArn(scope: Construct, primary: IKey, region: string): string {
  return Arn.format(
    { service: 'kms', region, resource: 'key', resourceName: primary.keyId },
    Stack.of(scope),
  );
}

/** 1. The primary multi-Region key (home): encrypts the MRSC table and the secrets. */
export class GlobalKeyStack extends Stack {
  readonly key: Key;

  constructor(scope: Construct, id: string, props: RegionalStageProps) {
    super(scope, id, {
      ...props,
      env: { account: props.stage.account, region: props.regions.home },
      terminationProtection: props.stage.production,
      description: `token-broker (${props.stage.name}): the multi-Region key of the lease table and the secrets`,
      tags: stackTags(props),
    });
    tagged(this, props.stage);
    this.key = new Key(this, 'Key', {
      description: `token-broker ${props.stage.name}: the two-Region lease table and the credential secrets`,
      multiRegion: true,
      enableKeyRotation: true,
      removalPolicy: props.stage.production ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
      pendingWindow: Duration.days(props.stage.production ? 30 : 7),
    });
  }
}

export interface GlobalKeyReplicaStackProps extends RegionalStageProps {
  primary: Key;
}

/** 2. The replica of the multi-Region key, in the peer (no L2 construct for it in aws-cdk-lib). */
export class GlobalKeyReplicaStack extends Stack {
  readonly keyArn: string;

  constructor(scope: Construct, id: string, props: GlobalKeyReplicaStackProps) {
    super(scope, id, {
      ...props,
      env: { account: props.stage.account, region: props.regions.peer },
      terminationProtection: props.stage.production,
      description: `token-broker (${props.stage.name}): the peer Region's replica of the multi-Region key`,
      tags: stackTags(props),
    });
    tagged(this, props.stage);
    // The primary's ARN crosses Regions: a multi-Region key's id is generated when it is created, so no name can
    // stand in for it. cdk.json's @aws-cdk/core:defaultCrossStackReferences = "weak" makes every reference
    // between stacks an Fn::GetStackOutput, which reads the producer's output at deploy, in another Region too:
    // no export, no custom resource (`crossRegionReferences` would add one writing SSM parameters, with a
    // Lambda function and its role). What weak references do not do: stop the key stack being deleted while
    // this one uses it; the key's RETAIN in production and the stacks' termination protection do.
    // The policy CDK gives a Key by default: the account administers it, and IAM policies grant its use
    // (each function's own, through DynamoDB or Secrets Manager only: infra/least-privilege.ts).
    const replica = new CfnReplicaKey(this, 'Key', {
      primaryKeyArn: props.primary.keyArn,
      description: `token-broker ${props.stage.name}: replica of the two-Region key`,
      keyPolicy: new PolicyDocument({
        statements: [
          new PolicyStatement({
            actions: ['kms:*'],
            principals: [new AccountRootPrincipal()],
            resources: ['*'],
          }),
        ],
      }),
      pendingWindowInDays: props.stage.production ? 30 : 7,
    });
    replica.applyRemovalPolicy(props.stage.production ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY);
    this.keyArn = replica.attrArn;
  }
}

export interface GlobalTableStackProps extends RegionalStageProps {
  primary: Key;
}

/** 3. The MRSC table (home and peer replicas, a witness) and the secrets with their replicas (home). */
export class GlobalTableStack extends Stack {
  readonly table: TableV2;
  readonly secrets: Secret[];

  constructor(scope: Construct, id: string, props: GlobalTableStackProps) {
    super(scope, id, {
      ...props,
      env: { account: props.stage.account, region: props.regions.home },
      terminationProtection: props.stage.production,
      description: `token-broker (${props.stage.name}): the two-Region lease table and the replicated secrets`,
      tags: stackTags(props),
    });
    const { stage, regions } = props;
    tagged(this, stage);
    const removalPolicy = stage.production ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    const peerKeyArn = replicaKeyArn(this, props.primary, regions.peer);

    // No TTL and no transactions on an MRSC table: what is stored here must be bounded without them (the
    // leases are one item per set and quota key, the tokens one item per set, all rewritten in place; the token
    // items' `purgeAt` is inert here, and a read ignores an item past it as it always did).
    this.table = new TableV2(this, 'Table', {
      tableName: globalTableName(stage),
      partitionKey: { name: PARTITION_KEY, type: AttributeType.STRING },
      multiRegionConsistency: MultiRegionConsistency.STRONG,
      replicas: [{ region: regions.peer }],
      witnessRegion: regions.witness,
      encryption: TableEncryptionV2.customerManagedKey(props.primary, { [regions.peer]: peerKeyArn }),
      deletionProtection: stage.production,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: false },
      removalPolicy,
    });
    Validations.of(this.table).acknowledge({
      id: 'AwsSolutions-DDB3',
      reason:
        'No point-in-time recovery, on purpose: a lease lives 30 s and is renewed every 10 s by each Region, so ' +
        'a restored copy is stale before it is usable, and a restore creates a new table nobody reads. Losing ' +
        'the table is what matters: deletion protection and RETAIN in production guard against that.',
    });

    // The secrets move into the stack: only a secret CloudFormation manages can be given a replica. Created
    // with a placeholder (no username: the refresher reports the secret as malformed and never calls the
    // vendor with it) until `token-broker put-credentials` writes the value, which replicates to the peer.
    const peerKey = Key.fromKeyArn(this, 'PeerKey', peerKeyArn);
    const names = [...new Set(stage.credentialSets.map((set) => set.secretName))];
    this.secrets = names.map((secretName, index) => {
      const secret = new Secret(this, `Credentials${index}`, {
        secretName,
        description: `token-broker ${stage.name}: vendor credentials (write them with token-broker put-credentials)`,
        encryptionKey: props.primary,
        replicaRegions: [{ region: regions.peer, encryptionKey: peerKey }],
        generateSecretString: {
          secretStringTemplate: '{}',
          generateStringKey: 'placeholder',
          excludePunctuation: true,
        },
        removalPolicy: RemovalPolicy.RETAIN,
      });
      // The same policy put-credentials puts and check-config compares (infra/secret-policy.ts); the replica
      // carries it too.
      new CfnResourcePolicy(this, `Credentials${index}Policy`, {
        secretId: secret.secretArn,
        resourcePolicy: secretResourcePolicy(stage),
        blockPublicPolicy: true,
      });
      Validations.of(secret).acknowledge({
        id: 'AwsSolutions-SMG4',
        reason:
          'No Secrets Manager rotation: the value is a vendor user password that only the vendor can change; ' +
          'operators write the new one with token-broker put-credentials and the refresher logs in with it ' +
          'at its next run (docs/runbook.md).',
      });
      return secret;
    });
  }
}
