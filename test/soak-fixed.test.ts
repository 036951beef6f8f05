import { describe, it } from 'vitest';
import { SOAK_TEST_NAME, SOAK_TIMEOUT_MS, shortSoak } from './support/soak-case.js';

describe('end-to-end soak (fixed windows)', () => {
  it(SOAK_TEST_NAME, () => shortSoak('fixed'), SOAK_TIMEOUT_MS);
});
