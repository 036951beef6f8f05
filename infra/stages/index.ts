import type { StageInput } from '../stage-config.js';
import { prod } from './prod.js';
import { prodRegions } from './prod-regions.js';
import { uat } from './uat.js';

/** Every stage the app knows, in deployment order. */
export const STAGES: readonly StageInput[] = [uat, prod];

/**
 * Example stages built only when named (`cdk synth -c stage=<name>`; CI synthesizes each): a two-Region stage
 * (docs/deploying.md, Two Regions), which is five stacks and not one the pipeline deploys.
 */
export const EXAMPLE_STAGES: readonly StageInput[] = [prodRegions];
