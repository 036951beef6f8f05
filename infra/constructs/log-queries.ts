import { type ILogGroup, QueryDefinition, QueryString } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { type RunbookAnchor, RunbookSection } from '../runbook.js';

type Source = 'refresher' | 'vend';

/** One saved CloudWatch Logs Insights query, and the runbook sections that send the on-call person to it. */
export interface LogQuerySpec {
  /** Saved as `<prefix>/<name>` (the console shows the prefix as a folder). */
  name: string;
  sources: readonly Source[];
  runbook: readonly RunbookAnchor[];
  query: ConstructorParameters<typeof QueryString>[0];
}

/**
 * The queries the runbook names, over the functions' JSON logs (Powertools: `level`, `message`, and the
 * attributes each log call passes). The refresher logs `login failed` / `no usable token` / `scheduled run`
 * with `credentialSetId`, `errorCode`, `requestId` (the vendor's); the vend function one `vend request` line
 * per request with `caller`, `credentialSet`, `route`, `decision` and `status`.
 */
export const LOG_QUERIES: readonly LogQuerySpec[] = [
  {
    name: 'ledger-clock-skew',
    sources: ['vend'],
    runbook: [RunbookSection.LedgerClockSkew],
    query: {
      filterStatements: ['message like /clock is (too far from|off) DynamoDB/'],
      statsStatements: [
        'count(*) as lines, min(offsetMs) as minOffsetMs, max(offsetMs) as maxOffsetMs, ' +
          'latest(message) as lastMessage by @logStream',
      ],
      sort: 'lines desc',
    },
  },
  {
    // The reports that taught a class's limits: who (caller), when, on which set and class; and the rises they
    // adopted (from, to, over which window).
    name: 'learned-class-reports',
    sources: ['vend'],
    runbook: [RunbookSection.ClassLimitBelowConfigured, RunbookSection.ClassLimitRaised],
    query: {
      fields: [
        '@timestamp',
        'credentialSet',
        'learnedClass',
        'raisedFrom',
        'raisedTo',
        'raisedWindowSeconds',
        'caller',
        'decision',
        'status',
      ],
      filterStatements: ['message = "vend request"', 'ispresent(learnedClass)'],
      sort: '@timestamp desc',
      limit: 200,
    },
  },
  {
    name: 'login-failures',
    sources: ['refresher'],
    runbook: [
      RunbookSection.TokenValidityLow,
      RunbookSection.CredentialsRejected,
      RunbookSection.VendorUnavailable,
      RunbookSection.EnvMismatch,
    ],
    query: {
      fields: [
        '@timestamp',
        'credentialSetId',
        'errorCode',
        'requestId',
        'kind',
        'consecutiveFailures',
        'nextAttemptAt',
      ],
      filterStatements: ['message = "login failed"'],
      sort: '@timestamp desc',
      limit: 200,
    },
  },
  {
    name: 'latest-run-per-set',
    sources: ['refresher'],
    runbook: [RunbookSection.NoUsableToken],
    query: {
      filterStatements: ['message in ["no usable token", "scheduled run", "login failed"]'],
      statsStatements: [
        'latest(@timestamp) as lastSeen, latest(action) as lastAction, latest(usable) as usable, ' +
          'latest(validitySeconds) as validitySeconds, latest(errorCode) as lastErrorCode, ' +
          'latest(requestId) as lastVendorRequestId by credentialSetId',
      ],
      sort: 'lastSeen desc',
    },
  },
  {
    name: 'vendor-429-reports',
    sources: ['vend'],
    runbook: [RunbookSection.VendorRateLimited],
    query: {
      filterStatements: ['message = "vend request"', 'decision = "VENDOR_429_REPORTED"'],
      statsStatements: ['count(*) as reports by credentialSet, caller, bin(5m)'],
      sort: 'reports desc',
    },
  },
  {
    name: 'permit-denials',
    sources: ['vend'],
    runbook: [RunbookSection.PermitDenials],
    query: {
      filterStatements: ['message = "vend request"', 'route = "acquirePermits"'],
      // decision: GRANTED, or DENIED_QUOTA / DENIED_COOLDOWN / DENIED_VENDOR_CAP.
      statsStatements: ['count(*) as requests by credentialSet, caller, decision'],
      sort: 'requests desc',
    },
  },
  {
    name: 'function-errors',
    sources: ['refresher', 'vend'],
    runbook: [
      RunbookSection.FunctionErrors,
      RunbookSection.DynamoDbErrors,
      RunbookSection.VendServerErrors,
      RunbookSection.CanaryRollback,
    ],
    query: {
      fields: [
        '@timestamp',
        '@log',
        'level',
        'message',
        'errorName',
        'errorCode',
        'cause',
        'status',
        '@message',
      ],
      filterStatements: ['level = "ERROR" or status >= 500 or @message like /Task timed out|Runtime\\./'],
      sort: '@timestamp desc',
      limit: 200,
    },
  },
  {
    name: 'invocation-durations',
    sources: ['refresher', 'vend'],
    runbook: [
      RunbookSection.FunctionDuration,
      RunbookSection.FunctionThrottles,
      RunbookSection.RefresherNotRunning,
      RunbookSection.VendLatency,
      RunbookSection.CanaryRollback,
    ],
    query: {
      filterStatements: ['@type = "REPORT"'],
      // @initDuration is only on the REPORT lines of cold starts: counting it counts them.
      statsStatements: [
        'count(*) as invocations, max(@duration) as maxMs, pct(@duration, 99) as p99Ms, count(@initDuration) as coldStarts by bin(5m), @log',
      ],
    },
  },
];

/**
 * The queries of a two-Region stage's lease renewer (infra/constructs/lease-renewer.ts saves them over its own
 * log group, in each Region): its refused and failed renewals (shared/regions/renewer.ts) per ledger key, with
 * the reason, the container's measured offset from DynamoDB's clock and the last error.
 */
export const RENEWER_LOG_QUERIES: readonly Omit<LogQuerySpec, 'sources'>[] = [
  {
    name: 'lease-renewals',
    runbook: [RunbookSection.LeaseRenewalsRefused, RunbookSection.LeaseRenewalsFailing],
    query: {
      filterStatements: ['message in ["lease renewal refused", "lease renewal failed"]'],
      statsStatements: [
        'count(*) as lines, latest(reason) as lastReason, min(offsetMs) as minOffsetMs, ' +
          'max(offsetMs) as maxOffsetMs, latest(error) as lastError by message, credentialSetId, ledgerKey, @logStream',
      ],
      sort: 'lines desc',
    },
  },
];

export interface LogQueriesProps {
  /** E.g. the stack name: the queries are saved as `<prefix>/<name>`. */
  namePrefix: string;
  logGroups: Record<Source, ILogGroup>;
}

/** Saves the runbook's Logs Insights queries with the stack, scoped to the functions' log groups. */
export class LogQueries extends Construct {
  readonly names: string[] = [];

  constructor(scope: Construct, id: string, props: LogQueriesProps) {
    super(scope, id);
    for (const spec of LOG_QUERIES) {
      const name = `${props.namePrefix}/${spec.name}`;
      new QueryDefinition(this, spec.name, {
        queryDefinitionName: name,
        queryString: new QueryString(spec.query),
        logGroups: spec.sources.map((source) => props.logGroups[source]),
      });
      this.names.push(name);
    }
  }
}
