import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { StageInput } from '../infra/stage-config.js';
import { EXAMPLE_STAGES, STAGES } from '../infra/stages/index.js';
import { UsageError } from './errors.js';

/** Every stage the CLI knows by name: the deployed ones and the examples (a two-Region stage, prod-regions). */
const KNOWN_STAGES: readonly StageInput[] = [...STAGES, ...EXAMPLE_STAGES];

/**
 * A stage by its name (the stages in infra/stages/, examples included: `cdk synth -c stage=<name>` builds those)
 * or a JSON file with the same shape (a pipeline that generates its stage). Only read and parsed as JSON here; the
 * schema checks come after.
 */
export function loadStageInput(
  command: string,
  nameOrPath: string,
  cwd: string,
): { input: StageInput; source: string } {
  const known = KNOWN_STAGES.find((stage) => stage.name === nameOrPath);
  if (known) return { input: structuredClone(known), source: `infra/stages (${nameOrPath})` };
  if (!/[/\\]|\.json$/.test(nameOrPath)) {
    throw new UsageError(
      `unknown stage "${nameOrPath}"; known: ${KNOWN_STAGES.map((s) => s.name).join(', ')} (or give a path to a JSON stage file)`,
      command,
    );
  }
  const path = resolve(cwd, nameOrPath);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new UsageError(`cannot read the stage file ${path}`, command);
  }
  try {
    return { input: JSON.parse(text) as StageInput, source: path };
  } catch {
    throw new UsageError(`the stage file ${path} is not JSON`, command);
  }
}
