import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Duration, Names, RemovalPolicy, Stage } from 'aws-cdk-lib';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, Runtime } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat, SourceMapMode } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { buildSync } from 'esbuild';
import { ZOD_FUNCTIONS_FILE } from '../../shared/aws/bundle/zod-functions-file.js';
import {
  BROKER_CONFIG_FILE,
  type BrokerConfigDocument,
  brokerConfigText,
  configRevision,
} from '../../shared/config/broker-config.js';
import { METRICS_NAMESPACE, SERVICE_NAME } from '../../shared/observability.js';
import { dynamoDbKeyAccess } from '../least-privilege.js';

/**
 * The esbuild options every function bundle is built with (the NodejsFunction's `bundling` below says why each),
 * for the files built beside it (its zod functions) and the bench's yardstick, so that they stay alike.
 */
export const FUNCTION_BUNDLE_OPTIONS = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node24',
  mainFields: ['module', 'main'],
  minify: true,
} as const;

/**
 * The item-level DynamoDB actions a function may be granted, each exactly as its SDK command is named
 * (`GetItemCommand` → `dynamodb:GetItem`). Table-level calls (CreateTable, DescribeTable) are local mode's.
 */
export type ItemAction =
  | 'GetItem'
  | 'PutItem'
  | 'UpdateItem'
  | 'DeleteItem'
  | 'Query'
  | 'Scan'
  | 'BatchGetItem'
  | 'BatchWriteItem';

export interface BrokerFunctionProps {
  /** The entry point (functions/*.ts), exporting `handler`. */
  entry: string;
  description: string;
  timeout: Duration;
  memorySize: number;
  environment: Record<string, string>;
  /**
   * The function's configuration document (credential sets, consumers, operators), shipped in its code asset
   * as broker-config.json beside the bundle (shared/config/broker-config.ts says why there). A change of it is
   * a change of the code asset: a new version.
   */
  config: BrokerConfigDocument;
  logRetention: RetentionDays;
  /** Production keeps the log group when the stack goes. */
  retainLogs: boolean;
  /** Asynchronous (scheduled) invocations retried by Lambda itself. */
  retryAttempts?: number;
  /** A fixed name for the execution role, when something outside the stack must name it; else generated. */
  roleName?: string;
  /** How long an asynchronous event may wait in Lambda's queue before it is dropped (60 s to 6 h). */
  maxEventAge?: Duration;
  /** Reserved concurrency: both a guaranteed share of the account's concurrency and a cap. */
  reservedConcurrentExecutions?: number;
}

const bundleModule = (name: string): string =>
  fileURLToPath(new URL(`../../shared/aws/bundle/${name}.ts`, import.meta.url));

/** Modules replaced in the bundles, by what runs in Lambda instead (test/infra-bundle.test.ts checks). */
export const BUNDLE_ALIASES: readonly { module: string; file: string }[] = [
  { module: '@aws-sdk/credential-provider-node', file: bundleModule('environment-credentials') },
  { module: '@smithy/core/event-streams', file: bundleModule('no-event-streams') },
  { module: '@smithy/core/checksum', file: bundleModule('native-sha256') },
  { module: '@aws-sdk/endpoint-cache', file: bundleModule('endpoint-cache') },
  { module: 'zod', file: bundleModule('zod-on-first-use') },
];

/**
 * Every broker function's defaults in one place: Node 24 on arm64, one minified CommonJS bundle with source maps
 * (the AWS SDK included, so the tested versions are the deployed ones), an explicit log group with retention,
 * and a role of its own that starts with nothing but writing to that log group. `bindTable` gives table access
 * and the table's name in one call, so permissions and configuration cannot drift apart.
 */
export class BrokerFunction extends NodejsFunction {
  constructor(scope: Construct, id: string, props: BrokerFunctionProps) {
    const logGroup = new LogGroup(scope, `${id}Logs`, {
      retention: props.logRetention,
      removalPolicy: props.retainLogs ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });
    // No AWSLambdaBasicExecutionRole: it lets the function write to any log group (cdk-nag IAM4).
    const role = new Role(scope, `${id}Role`, {
      assumedBy: new ServicePrincipal('lambda.amazonaws.com'),
      description: `${props.description} (execution role)`,
      ...(props.roleName ? { roleName: props.roleName } : {}),
    });
    // Written into the cloud assembly's directory at synth, copied into the asset after bundling.
    const configDir = path.join(Stage.of(scope)?.outdir ?? '.', 'broker-config');
    mkdirSync(configDir, { recursive: true });
    const configFile = path.join(configDir, `${Names.uniqueId(scope)}-${id}.json`);
    const configText = brokerConfigText(props.config);
    writeFileSync(configFile, configText);
    // The zod functions, loaded on first use from beside the bundle (shared/aws/bundle/zod-on-first-use.ts).
    const zodFile = path.join(configDir, `${Names.uniqueId(scope)}-${id}-${ZOD_FUNCTIONS_FILE}`);
    buildSync({
      ...FUNCTION_BUNDLE_OPTIONS,
      mainFields: [...FUNCTION_BUNDLE_OPTIONS.mainFields],
      entryPoints: [bundleModule('zod-functions')],
      outfile: zodFile,
      // zod's own frames need no mapping: the frames of ours that call it are mapped through the bundle's map.
      sourcemap: false,
      logLevel: 'error',
    });
    super(scope, id, {
      entry: props.entry,
      handler: 'handler',
      description: props.description,
      runtime: Runtime.NODEJS_24_X,
      architecture: Architecture.ARM_64,
      timeout: props.timeout,
      memorySize: props.memorySize,
      role,
      logGroup,
      retryAttempts: props.retryAttempts,
      maxEventAge: props.maxEventAge,
      reservedConcurrentExecutions: props.reservedConcurrentExecutions,
      environment: {
        ...props.environment,
        BROKER_CONFIG_REVISION: configRevision(configText),
        // No NODE_OPTIONS=--enable-source-maps: it reads and indexes the whole map at every cold start. The entry
        // modules map stack traces through it when one is first formatted (shared/source-mapped-stacks.ts).
        POWERTOOLS_SERVICE_NAME: SERVICE_NAME,
        POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
      },
      bundling: {
        // CommonJS output (the ESM sources still preferred, for tree shaking): an ESM bundle's `import` of a
        // Node built-in is hoisted to the top and links the built-in's whole ESM facade at load, whether or not
        // the code that needs it ever runs (node:http's facade alone loads undici: ~25 ms of a cold start);
        // in CommonJS each built-in is required where, and when, the module that uses it is initialised.
        format: OutputFormat.CJS,
        target: FUNCTION_BUNDLE_OPTIONS.target,
        mainFields: [...FUNCTION_BUNDLE_OPTIONS.mainFields],
        minify: FUNCTION_BUNDLE_OPTIONS.minify,
        sourceMap: true,
        sourceMapMode: SourceMapMode.DEFAULT,
        // Stack traces need file names and lines, not the sources: a smaller asset and a faster cold start.
        sourcesContent: false,
        bundleAwsSDK: true,
        externalModules: [],
        // Only what runs in Lambda: the credentials Lambda gives (the environment's), no event streams, SHA-256 from
        // node:crypto alone, and zod
        // from beside the bundle when a schema is first built. Each stand-in says why (shared/aws/bundle/).
        esbuildArgs: { '--alias': BUNDLE_ALIASES.map(({ module, file }) => `${module}=${file}`) },
        forceDockerBundling: false,
        commandHooks: {
          beforeBundling: () => [],
          beforeInstall: () => [],
          afterBundling: (_inputDir: string, outputDir: string) => [
            `cp ${JSON.stringify(configFile)} ${JSON.stringify(path.join(outputDir, BROKER_CONFIG_FILE))}`,
            `cp ${JSON.stringify(zodFile)} ${JSON.stringify(path.join(outputDir, ZOD_FUNCTIONS_FILE))}`,
          ],
        },
      },
    });
    logGroup.grantWrite(role);
  }

  /**
   * Puts the table's name in `envName` and grants exactly the item actions the function's code sends to it
   * (test/infra-least-privilege.test.ts records them), on that table only; and the table key's use, through
   * DynamoDB only. Not CDK's grantReadData / grantReadWriteData: they add Scan, Query, Batch*, DescribeTable,
   * the stream reads and KMS actions usable outside DynamoDB. `leadingKeys`: only the items whose partition key
   * matches one of these patterns (a table shared with items of another function, such as the MRSC table's).
   */
  bindTable(
    table: ITable,
    envName: string,
    actions: readonly ItemAction[],
    leadingKeys?: readonly string[],
  ): void {
    this.addEnvironment(envName, table.tableName);
    this.grantItems(table, actions, leadingKeys);
  }

  /** As bindTable, without naming the table in the environment (a table some variable names already). */
  grantItems(table: ITable, actions: readonly ItemAction[], leadingKeys?: readonly string[]): void {
    this.addToRolePolicy(
      new PolicyStatement({
        actions: actions.map((action) => `dynamodb:${action}`),
        resources: [table.tableArn],
        ...(leadingKeys
          ? { conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [...leadingKeys] } } }
          : {}),
      }),
    );
    if (table.encryptionKey) dynamoDbKeyAccess(this, table.encryptionKey);
  }
}
