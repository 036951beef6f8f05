import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BROKER_CONFIG_FILE } from '../../shared/config/broker-config.js';

/**
 * A function's configuration document (broker-config.json) as a file, the way the code asset carries it:
 * `document` as given (to test a wrong one), or built from its parts with its revision.
 */
export function writeConfigDocument(document: unknown): { file: string; remove: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), 'broker-config-'));
  const file = path.join(dir, BROKER_CONFIG_FILE);
  writeFileSync(file, typeof document === 'string' ? document : JSON.stringify(document));
  return { file, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
