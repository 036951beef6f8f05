import { failureLine } from '../exit-codes.js';
import { isoSeconds } from '../format.js';
import type { CliIo } from '../io.js';

/** The interval of `--watch` given without seconds, and the shortest one taken (each round is one signed call). */
export const WATCH_DEFAULT_SECONDS = 10;
export const WATCH_MIN_SECONDS = 2;

/** Cursor home and clear screen: each round redraws the terminal instead of scrolling. */
const REDRAW = '\u001b[H\u001b[2J';

/**
 * Prints `round()` every `seconds` of the CLI's clock until the operator interrupts (Ctrl-C): on a terminal in
 * place, elsewhere one after the other. A round that fails prints its error line instead and the watch goes on
 * (a network blip must not end it). Returns 0: the operator stopped it.
 */
export async function watchRounds(
  io: CliIo,
  label: string,
  seconds: number,
  round: () => Promise<string>,
): Promise<number> {
  const interrupted = io.interruption();
  const tty = io.stdout.isTTY === true;
  for (let rounds = 0; !interrupted.aborted; rounds++) {
    let text: string;
    try {
      text = await round();
    } catch (error) {
      text = failureLine(label, error).line;
    }
    const footer = `${isoSeconds(io.clock.now())}, every ${seconds}s; Ctrl-C stops`;
    io.stdout.write(`${tty ? REDRAW : rounds > 0 ? '\n' : ''}${text}\n\n${footer}\n`);
    try {
      await io.clock.sleep(seconds * 1000, interrupted);
    } catch {
      break;
    }
  }
  return 0;
}
