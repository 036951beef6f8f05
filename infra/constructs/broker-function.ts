import { type Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import { Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, Runtime } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat, SourceMapMode } from 'aws-cdk-lib/aws-lambda-nodejs';
import { LogGroup, type RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { METRICS_NAMESPACE, SERVICE_NAME } from '../../shared/observability.js';

/** Node's `require` inside an ESM bundle, for the CommonJS dependencies esbuild inlines. */
const ESM_REQUIRE_SHIM =
  "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);";

export interface BrokerFunctionProps {
  /** The entry point (functions/*.ts), exporting `handler`. */
  entry: string;
  description: string;
  timeout: Duration;
  memorySize: number;
  environment: Record<string, string>;
  logRetention: RetentionDays;
  /** Production keeps the log group when the stack goes. */
  retainLogs: boolean;
  /** Asynchronous (scheduled) invocations retried by Lambda itself. */
  retryAttempts?: number;
  /** How long an asynchronous event may wait in Lambda's queue before it is dropped (60 s to 6 h). */
  maxEventAge?: Duration;
  /** Reserved concurrency: both a guaranteed share of the account's concurrency and a cap. */
  reservedConcurrentExecutions?: number;
}

/**
 * Every broker function's defaults in one place: Node 24 on arm64, one minified ESM bundle with source maps
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
        NODE_OPTIONS: '--enable-source-maps',
        POWERTOOLS_SERVICE_NAME: SERVICE_NAME,
        POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
      },
      bundling: {
        format: OutputFormat.ESM,
        target: 'node24',
        mainFields: ['module', 'main'],
        banner: ESM_REQUIRE_SHIM,
        minify: true,
        sourceMap: true,
        sourceMapMode: SourceMapMode.DEFAULT,
        // Stack traces need file names and lines, not the sources: a smaller asset and a faster cold start.
        sourcesContent: false,
        bundleAwsSDK: true,
        externalModules: [],
        forceDockerBundling: false,
      },
    });
    logGroup.grantWrite(role);
  }

  /** Puts the table's name in `envName` and grants exactly the access asked for. */
  bindTable(table: ITable, envName: string, access: 'read' | 'readWrite'): void {
    this.addEnvironment(envName, table.tableName);
    if (access === 'read') {
      table.grantReadData(this);
      return;
    }
    table.grantReadWriteData(this);
    if (!this.role) return;
    for (const action of ['kms:ReEncrypt*', 'kms:GenerateDataKey*']) {
      Validations.of(this.role).acknowledge({
        id: `AwsSolutions-IAM5[Action::${action}]`,
        reason:
          `${action} comes from Table.grantReadWriteData on a table encrypted with a customer-managed key: ` +
          "DynamoDB uses the key on the caller's behalf when it writes. The statement is limited to that one " +
          "key's ARN; no statement of this role has a wildcard resource.",
      });
    }
  }
}
