import { inject } from 'vitest';
import { requireLongSuite } from './test-projects.js';

/**
 * The marker of a test file that waits on real time: a soak of real token lifetimes, a broker on its real
 * schedule, anything that must let the wall clock pass. Importing this module (`import './support/real-time.js';`),
 * directly or through a test module (test/support/soak-case.ts does), puts the file in `npm run test:long`, out of
 * `npm test` (test/support/test-projects.ts, docs/testing.md). What can run on a ManualClock should: then it
 * needs no marker and stays in `npm test`.
 *
 * Importing it also checks, when the file loads, that it does run in a project of test:long (`long`,
 * `long-dynamodb`): a file that reached it in a way its imports do not show fails at once, saying so.
 */
requireLongSuite(inject('testSuite'));
