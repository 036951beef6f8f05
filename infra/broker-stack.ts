import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CfnOutput, Duration, Stack, type StackProps, Tags } from 'aws-cdk-lib';
import { Table } from 'aws-cdk-lib/aws-dynamodb';
import { AccountPrincipal, OrganizationPrincipal, PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { Key } from 'aws-cdk-lib/aws-kms';
import { FunctionUrlAuthType, InvokeMode } from 'aws-cdk-lib/aws-lambda';
import type { RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { KEY_PREFIX } from '../shared/aws/keys.js';
import { verifyBrokerConfig } from '../shared/config/broker-config.js';
import { LEARNED_TABLE_ENV } from '../shared/ledger/learned-store.js';
import { LEDGER_REGIONAL_ENV } from '../shared/vend/vend-config.js';
import { AlarmTopic } from './constructs/alarm-topic.js';
import { BrokerAlarms } from './constructs/broker-alarms.js';
import { BrokerDashboard } from './constructs/broker-dashboard.js';
import { BrokerFunction } from './constructs/broker-function.js';
import { BrokerTables } from './constructs/broker-tables.js';
import { LeaseRenewer } from './constructs/lease-renewer.js';
import { LogQueries } from './constructs/log-queries.js';
import { RefreshSchedule } from './constructs/refresh-schedule.js';
import { VendRollout } from './constructs/vend-rollout.js';
import {
  REFRESHER_MEMORY_MB,
  REFRESHER_RESERVED_CONCURRENCY,
  REFRESHER_TIMEOUT,
  VEND_MEMORY_MB,
  VEND_TIMEOUT,
} from './function-sizing.js';
import { refresherSecretAccess } from './least-privilege.js';
import { refresherRoleName } from './role-names.js';
import { brokerStackName } from './stack-names.js';
import { callerAccounts, functionConfigDocuments, type StageConfig } from './stage-config.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** A serving stack's part in a two-Region stage (infra/regions-app.ts). */
export interface RegionalServing {
  /** This stack's Region and the other serving Region (the renewer's OWN_REGION and OTHER_REGION). */
  ownRegion: string;
  otherRegion: string;
  /** The MRSC table's name, the same in both Regions (infra/global-stacks.ts). */
  globalTableName: string;
  /** The multi-Region key's ARN in this Region (primary or replica): the global table's and the secrets'. */
  keyArn: string;
}

export interface BrokerStackProps extends StackProps {
  stage: StageConfig;
  /** The function entry points; the project's functions/ by default. */
  entries?: { refresher: string; vend: string; renewer?: string };
  /**
   * The stack's name, the prefix of its alarms and its dashboard's name (dashboards are global to the account):
   * `stackName(stage)` by default; a two-Region stage's peer has its own.
   */
  name?: string;
  /** The stack's Region: the stage's by default (a two-Region stage's peer is elsewhere). */
  region?: string;
  /** The refresher role's fixed name: `refresherRoleName(stage.name)` by default. */
  refresherRoleName?: string;
  /**
   * Set in a two-Region stage: the lease renewer, the secrets under the multi-Region key, the tokens on the MRSC
   * table, and the vend function's ledger held to its Region's share.
   */
  regional?: RegionalServing;
}

export const DEFAULT_ENTRIES = {
  refresher: path.join(ROOT, 'functions/refresher.ts'),
  vend: path.join(ROOT, 'functions/vend-token.ts'),
  renewer: path.join(ROOT, 'functions/lease-renewer.ts'),
};

export const stackName = (stage: StageConfig): string => brokerStackName(stage.name);

/**
 * Everything one stage of the broker runs on: the tables and their key, the refresher on a schedule, the vend
 * function behind an IAM-authenticated Function URL, the alarms, their topic and a dashboard.
 */
export class BrokerStack extends Stack {
  constructor(scope: Construct, id: string, props: BrokerStackProps) {
    super(scope, id, {
      ...props,
      env: { account: props.stage.account, region: props.region ?? props.stage.region },
      terminationProtection: props.stage.production,
      description: `token-broker (${props.stage.name}): vendor access tokens for internal services`,
      // The stack's own tags (CloudFormation passes them on): with @aws-cdk/core:explicitStackTags, only
      // these reach the stack; Tags.of(this) below tags the resources in the template.
      tags: { ...props.tags, service: 'token-broker', stage: props.stage.name },
    });
    const { stage } = props;
    const entries = props.entries ?? DEFAULT_ENTRIES;
    const name = props.name ?? stackName(stage);
    Tags.of(this).add('service', 'token-broker');
    Tags.of(this).add('stage', stage.name);

    const config = functionConfigDocuments(stage);
    // The functions use their documents without parsing them again: their own parsers must read them as written.
    verifyBrokerConfig(config.refresher, `stage "${stage.name}", the refresher's configuration`);
    verifyBrokerConfig(config.vend, `stage "${stage.name}", the vend function's configuration`);

    const tables = new BrokerTables(this, 'Tables', { production: stage.production });
    const logRetention = stage.logRetentionDays as RetentionDays;
    const { regional } = props;
    const globalKey = regional ? Key.fromKeyArn(this, 'GlobalKey', regional.keyArn) : undefined;
    // Named, not referenced: the table is another stack's (and in the peer, another Region's replica of it).
    const globalTable = regional
      ? Table.fromTableAttributes(this, 'GlobalTable', {
          tableName: regional.globalTableName,
          encryptionKey: globalKey,
        })
      : undefined;
    // The token items: in a two-Region stage on the MRSC table, so that one login per set serves both Regions
    // (docs/multi-region.md), and there only the set items (`set#…`), not the leases beside them. The stack's
    // own tokens table stays (empty, unwatched), so that the stage can go back to one Region without replacing it.
    const tokens = globalTable
      ? { table: globalTable, leadingKeys: [`${KEY_PREFIX.set}*`] }
      : { table: tables.tokens, leadingKeys: undefined };

    const refresher = new BrokerFunction(this, 'Refresher', {
      entry: entries.refresher,
      description: `token-broker ${stage.name}: re-logs in to the vendor ahead of each token's expiry`,
      timeout: REFRESHER_TIMEOUT,
      memorySize: REFRESHER_MEMORY_MB,
      environment: {},
      config: config.refresher,
      logRetention,
      retainLogs: stage.production,
      // A failed run is not retried by Lambda: the next scheduled run is the retry.
      retryAttempts: 0,
      // The secrets' resource policy names this role before the stack exists (infra/secret-policy.ts).
      roleName: props.refresherRoleName ?? refresherRoleName(stage.name),
      // Only the schedule invokes it asynchronously (vend's on-demand re-logins are synchronous). An event
      // that waited in Lambda's queue (throttled, say) longer than one period is dropped: the next scheduled
      // run does the same work, and stale runs must not pile up behind it for Lambda's default 6 hours.
      maxEventAge: Duration.minutes(stage.refreshScheduleMinutes),
      reservedConcurrentExecutions: REFRESHER_RESERVED_CONCURRENCY,
    });
    refresher.bindTable(tokens.table, 'TOKENS_TABLE_NAME', ['GetItem', 'UpdateItem'], tokens.leadingKeys);
    refresherSecretAccess(this, refresher, stage, globalKey);

    const vend = new BrokerFunction(this, 'Vend', {
      entry: entries.vend,
      description: `token-broker ${stage.name}: vends tokens and rate permits to authorised consumers`,
      timeout: VEND_TIMEOUT,
      memorySize: VEND_MEMORY_MB,
      environment: {
        REFRESHER_FUNCTION_NAME: refresher.functionName,
        // A Region's ledger: grants held to its Region's share (absent in a one-Region stage: as before).
        ...(regional ? { [LEDGER_REGIONAL_ENV]: 'true' } : {}),
      },
      config: config.vend,
      logRetention,
      retainLogs: stage.production,
      reservedConcurrentExecutions: stage.rollout.vendReservedConcurrency,
    });
    vend.bindTable(tokens.table, 'TOKENS_TABLE_NAME', ['GetItem'], tokens.leadingKeys);
    // DeleteItem: a report-driven re-login claim is given back when no login came of it.
    vend.bindTable(tables.ledger, 'LEDGER_TABLE_NAME', ['GetItem', 'UpdateItem', 'DeleteItem']);
    // What a set learned of its classes' limits (docs/class-limits.md): a report that teaches writes the set's
    // `learned#` item whole, on the condition of its version; read with the GetItem above. Kept in a two-Region
    // stage too, where the learned items are on the MRSC table: the deploy that adds `regions` shifts the vend
    // function's `live` alias gradually, and the version before it, on this same role, still learns here.
    vend.grantItems(tables.ledger, ['PutItem'], [`${KEY_PREFIX.learned}*`]);
    // A two-Region stage: the learned items on the MRSC table, one view that both Regions learn into and lease
    // (docs/multi-region.md, "Learned limits"), and there only those (the token and lease items are not its).
    if (globalTable)
      vend.bindTable(globalTable, LEARNED_TABLE_ENV, ['GetItem', 'PutItem'], [`${KEY_PREFIX.learned}*`]);
    // On-demand re-logins go through the refresher; the vend function itself never sees credentials.
    vend.addToRolePolicy(
      new PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [refresher.functionArn] }),
    );

    // The URL serves the `live` alias, which CodeDeploy moves to each new version gradually (VendRollout).
    const rollout = new VendRollout(this, 'VendRollout', {
      fn: vend,
      deployment: stage.rollout.vendDeployment,
    });
    const url = rollout.alias.addFunctionUrl({
      authType: FunctionUrlAuthType.AWS_IAM,
      invokeMode: InvokeMode.BUFFERED,
    });
    // Granted to the callers' accounts (or their organization), not to each principal: the policy stays the same
    // size whatever the number of consumers, and the vend function's own rules decide, per caller and set,
    // refusing with 403 any principal of those accounts that no consumer or operator rule names.
    if (stage.urlAccess.organizationId !== undefined) {
      url.grantInvokeUrl(new OrganizationPrincipal(stage.urlAccess.organizationId));
    } else {
      for (const account of callerAccounts(stage)) url.grantInvokeUrl(new AccountPrincipal(account));
    }

    new RefreshSchedule(this, 'Schedule', { target: refresher, minutes: stage.refreshScheduleMinutes });

    const topic = new AlarmTopic(this, 'Alarms', {
      key: tables.key,
      alarms: stage.alarms,
      alarmNamePrefix: name,
    }).topic;
    // The tables that hold the items, watched where they are: in a two-Region stage the tokens' alarms and widget
    // are the MRSC table's in this Region (which also holds the leases: the renewer has no alarms of its own on
    // it), never the stack's own tokens table, which stays empty.
    const tableMap = { tokens: tokens.table, ledger: tables.ledger };
    const tableNotes = regional
      ? {
          tokens: `the two-Region table ${regional.globalTableName} in ${regional.ownRegion}, which also holds the leases`,
        }
      : undefined;
    const alarms = new BrokerAlarms(this, 'AlarmSet', {
      stage,
      namePrefix: name,
      topic,
      refresher: { fn: refresher, timeout: REFRESHER_TIMEOUT },
      vend: { fn: vend, alias: rollout.alias, timeout: VEND_TIMEOUT },
      tables: tableMap,
      ...(tableNotes ? { tableNotes } : {}),
    });
    rollout.rollBackOn(alarms.rollbackAlarms);
    new BrokerDashboard(this, 'Dashboard', {
      stage,
      dashboardName: name,
      functions: { refresher, vend },
      tables: tableMap,
      ...(tableNotes ? { tableNotes } : {}),
      alarms: alarms.alarms,
    });
    if (regional && globalTable) {
      const renewer = new LeaseRenewer(this, 'LeaseRenewer', {
        entry: entries.renewer ?? DEFAULT_ENTRIES.renewer,
        stageName: stage.name,
        config: config.refresher,
        logRetention,
        retainLogs: stage.production,
        ledger: tables.ledger,
        globalTable,
        ownRegion: regional.ownRegion,
        otherRegion: regional.otherRegion,
        topic,
        namePrefix: name,
        runbookUrl: stage.runbookUrl,
      });
      new CfnOutput(this, 'GlobalTableName', { value: regional.globalTableName });
      new CfnOutput(this, 'LeaseRenewerFunctionName', { value: renewer.fn.functionName });
    }
    new LogQueries(this, 'LogQueries', {
      namePrefix: name,
      logGroups: { refresher: refresher.logGroup, vend: vend.logGroup },
    });

    new CfnOutput(this, 'VendUrl', {
      value: url.url,
      description: 'Function URL of the vend API (IAM auth)',
    });
    // Where the tokens are: the MRSC table in a two-Region stage.
    new CfnOutput(this, 'TokensTableName', { value: tokens.table.tableName });
    new CfnOutput(this, 'LedgerTableName', { value: tables.ledger.tableName });
    new CfnOutput(this, 'AlarmTopicArn', { value: topic.topicArn });
    new CfnOutput(this, 'RefresherFunctionName', { value: refresher.functionName });
    // For the rollout commands of docs/deploying.md (aws deploy list-deployments, aws lambda get-alias).
    new CfnOutput(this, 'VendFunctionName', { value: vend.functionName });
    new CfnOutput(this, 'VendDeploymentApplication', {
      value: rollout.deploymentGroup.application.applicationName,
    });
    new CfnOutput(this, 'VendDeploymentGroup', { value: rollout.deploymentGroup.deploymentGroupName });
  }
}
