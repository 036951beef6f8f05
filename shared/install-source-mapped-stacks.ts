/**
 * Imported first by each function's entry module, so that a stack formatted during any later module's init is
 * mapped too (see source-mapped-stacks.ts).
 */
import { installSourceMappedStacks } from './source-mapped-stacks.js';

installSourceMappedStacks();
