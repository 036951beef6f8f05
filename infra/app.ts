import { createBrokerApp } from './broker-app.js';

// The CDK app (cdk.json): every stage, or only `-c stage=<name>`. Offline: no lookups, no credentials.
createBrokerApp().app.synth();
