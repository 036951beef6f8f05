/**
 * Stands in for `@smithy/core/event-streams` in the functions' bundles (an esbuild alias, set in
 * infra/constructs/broker-function.ts). No call of ours has an event stream (DynamoDB, Secrets Manager and the
 * signed Lambda invoke are plain request and answer), yet the SDK's protocol layer loads the module with a
 * dynamic `import()`, and to honour that esbuild wraps the module and everything it shares with the rest of
 * `@smithy/core` (about 150 modules) in lazy-init closures: code every cold start parses and runs through.
 * Should a call ever need an event stream, it fails loudly here instead of half-working.
 */
const unavailable = (): never => {
  throw new Error('event streams are not bundled (shared/aws/bundle/no-event-streams.ts)');
};

export class EventStreamSerde {
  constructor() {
    unavailable();
  }
}

export const eventStreamSerdeProvider = unavailable;
