import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { Key } from 'aws-cdk-lib/aws-kms';
import { Construct } from 'constructs';
import { PARTITION_KEY, TTL_ATTRIBUTE } from '../../shared/aws/tables.js';

export interface BrokerTablesProps {
  /** Production: deletion protection on, tables and key retained when the stack goes. */
  production: boolean;
}

/**
 * The broker's state: the tokens table (per credential set: current and previous token, refresh lease,
 * failure state) and the ledger table (per access token: the rate ledger), both on demand, both encrypted
 * with one customer-managed key that rotates, both expiring items through the `purgeAt` TTL attribute.
 */
export class BrokerTables extends Construct {
  readonly key: Key;
  readonly tokens: Table;
  readonly ledger: Table;

  constructor(scope: Construct, id: string, props: BrokerTablesProps) {
    super(scope, id);
    const removalPolicy = props.production ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    this.key = new Key(this, 'Key', {
      description: 'token-broker: encrypts the tokens and ledger tables and the alarm topic',
      enableKeyRotation: true,
      removalPolicy,
      pendingWindow: Duration.days(props.production ? 30 : 7),
    });
    this.tokens = this.table('Tokens', removalPolicy, props.production);
    this.ledger = this.table('Ledger', removalPolicy, props.production);
  }

  private table(id: string, removalPolicy: RemovalPolicy, production: boolean): Table {
    const table = new Table(this, id, {
      partitionKey: { name: PARTITION_KEY, type: AttributeType.STRING },
      billingMode: BillingMode.PAY_PER_REQUEST,
      encryption: TableEncryption.CUSTOMER_MANAGED,
      encryptionKey: this.key,
      timeToLiveAttribute: TTL_ATTRIBUTE,
      deletionProtection: production,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: false },
      removalPolicy,
    });
    Validations.of(table).acknowledge({
      id: 'AwsSolutions-DDB3',
      reason:
        'No point-in-time recovery, on purpose: every item is short-lived and rebuilt by the broker itself. ' +
        'A token lives at most hours and is re-obtained by the next scheduled re-login (5 min); a ledger item ' +
        'only counts the last hour of requests, so a restored copy would be stale by the time it was usable, ' +
        'and a restore creates a new table the functions do not read. The real risk, deleting the table, is ' +
        'covered by deletion protection and RETAIN in production.',
    });
    return table;
  }
}
