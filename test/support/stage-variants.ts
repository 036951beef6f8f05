import { parseStageConfig, type StageInput } from '../../infra/stage-config.js';
import { ConfigurationError } from '../../shared/errors.js';

/** A deep copy of a stage with one change, so every case starts from a valid stage. */
export function variant(
  base: StageInput,
  change: (stage: StageInput & Record<string, unknown>) => void,
): StageInput {
  const copy = structuredClone(base) as StageInput & Record<string, unknown>;
  change(copy);
  return copy;
}

/** The ConfigurationError a stage is refused with; fails the test when the stage is accepted. */
export function stageFailureOf(input: StageInput): ConfigurationError {
  try {
    parseStageConfig(input);
  } catch (error) {
    if (error instanceof ConfigurationError) return error;
    throw error;
  }
  throw new Error('the stage was accepted');
}
