import { readFileSync } from 'node:fs';
import { basename, extname, resolve } from 'node:path';
import { parseStageConfig, type StageConfig, type StageInput } from '../infra/stage-config.js';
import { EXAMPLE_STAGES, STAGES } from '../infra/stages/index.js';
import { closestKey } from '../shared/config/unknown-keys.js';
import { UsageError } from './errors.js';

/** Every stage the CLI knows by name: the deployed ones and the examples (a two-Region stage, prod-regions). */
const KNOWN_STAGES: readonly StageInput[] = [...STAGES, ...EXAMPLE_STAGES];

const knownNames = () => KNOWN_STAGES.map((stage) => stage.name);

/** What the command takes, for a message that says what it got instead. */
const takes = (what: string) =>
  `${what} takes a stage name, one of ${knownNames().join(', ')}, or the path of a JSON stage file`;

/**
 * A stage by its name (the stages in infra/stages/, examples included: `cdk synth -c stage=<name>` builds those)
 * or a JSON file with the same shape (a pipeline that generates its stage). Only read and parsed as JSON here; the
 * schema checks come after. `what` is how the command takes it ("check-config", "--stage"), and `asTyped` how a
 * stage name is written there, for "did you mean".
 */
export function loadStageInput(
  command: string,
  nameOrPath: string,
  cwd: string,
  options: { what?: string; asTyped?: (name: string) => string } = {},
): { input: StageInput; source: string } {
  const what = options.what ?? command;
  const asTyped = options.asTyped ?? ((name: string) => `token-broker ${command} ${name}`);
  const known = KNOWN_STAGES.find((stage) => stage.name === nameOrPath);
  if (known) return { input: structuredClone(known), source: `infra/stages (${nameOrPath})` };
  if (!/[/\\]|\.json$/.test(nameOrPath)) {
    const meant = closestKey(nameOrPath, knownNames());
    throw new UsageError(
      `unknown stage "${nameOrPath.slice(0, 40)}"${meant ? `; did you mean "${meant}"?` : ':'} ${takes(what)}`,
      command,
    );
  }
  // A stage's TypeScript source (infra/stages/uat.ts) where its name was meant.
  const stem = basename(nameOrPath, extname(nameOrPath));
  if (!nameOrPath.endsWith('.json') && knownNames().includes(stem)) {
    throw new UsageError(`${takes(what)}, not ${nameOrPath}: did you mean "${asTyped(stem)}"?`, command);
  }
  const path = resolve(cwd, nameOrPath);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new UsageError(`cannot read the stage file ${path}`, command);
  }
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch {
    throw new UsageError(`the stage file ${path} is not JSON; ${takes(what)}`, command);
  }
  if (isLocalBrokerConfig(input)) {
    throw new UsageError(
      `${path} is the local broker's configuration (npm start), not a stage; ${takes(what)}. The local broker checks its own configuration when it starts`,
      command,
    );
  }
  return { input: input as StageInput, source: path };
}

/**
 * local/broker.config.json and its copies: the local broker's callers and sandbox, not a deployed stage. Checked as
 * a stage it would answer with a screenful of generic errors; what it is, is the one useful answer.
 */
function isLocalBrokerConfig(input: unknown): boolean {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) return false;
  const keys = Object.keys(input);
  return keys.includes('callers') && !keys.includes('account') && !keys.includes('name');
}

/**
 * The stage an option `--stage` names (put-credentials, and the broker commands' URL), parsed: a name of
 * infra/stages/ or a JSON stage file, the messages about it speaking of `--stage`.
 */
export function stageOption(command: string, nameOrPath: string, cwd: string): StageConfig {
  const { input } = loadStageInput(command, nameOrPath, cwd, {
    what: '--stage',
    asTyped: (name) => `--stage ${name}`,
  });
  return parseStageConfig(input);
}
