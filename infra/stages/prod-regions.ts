import type { StageInput } from '../stage-config.js';
import { prod } from './prod.js';

/**
 * An example two-Region stage (docs/deploying.md, Two Regions): production in Ireland (home) and Frankfurt
 * (peer), London as the witness of the lease table: all three in MRSC's EU Region set. Not deployed by
 * default and not in the pipeline: `cdk synth -c stage=prod-regions`. Its own placeholder account, so that its
 * secrets (which a two-Region stage creates itself, to replicate them) never meet prod's.
 */
export const prodRegions = {
  ...prod,
  name: 'prod-regions',
  account: '555555555555',
  credentialSets: prod.credentialSets.map((set) => ({
    ...set,
    secretName: set.secretName.replace('token-broker/prod/', 'token-broker/prod-regions/'),
  })),
  consumers: prod.consumers.map((consumer) => ({
    ...consumer,
    principalArn: consumer.principalArn.replace(':222222222222:', ':555555555555:'),
  })),
  operators: [
    { name: 'oncall', principalArn: 'arn:aws:iam::555555555555:role/token-broker-oncall', refresh: true },
  ],
  breakGlassPrincipals: ['arn:aws:iam::555555555555:role/token-broker-break-glass'],
  regions: { home: 'eu-west-1', peer: 'eu-central-1', witness: 'eu-west-2' },
} satisfies StageInput;
