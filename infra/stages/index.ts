import type { StageInput } from '../stage-config.js';
import { prod } from './prod.js';
import { uat } from './uat.js';

/** Every stage the app knows, in deployment order. */
export const STAGES: readonly StageInput[] = [uat, prod];
