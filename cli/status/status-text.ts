import { classesSection } from './class-limits.js';
import { clip, narrowStatusTable } from './narrow-table.js';
import { type StatusEntry, statusTable } from './render.js';

export interface StatusLayout {
  /** Every column (`--wide`, or `--consumers`), else the narrow table. */
  wide: boolean;
  /** The narrow table's width: the terminal's, or NARROW_DEFAULT_WIDTH. */
  width: number;
  /** With `--consumers`: the window of the permits per consumer. */
  consumersWindowSeconds?: number;
}

/**
 * What `status` prints as text: its sections in order, a blank line between, the sets table first. A section
 * of its own (learned class limits, say) is one more entry of the list, with its own title line.
 */
export function statusText(entries: StatusEntry[], nowMs: number, layout: StatusLayout): string {
  const sections = [
    layout.wide
      ? statusTable(
          entries,
          nowMs,
          layout.consumersWindowSeconds === undefined
            ? {}
            : { consumersWindowSeconds: layout.consumersWindowSeconds },
        )
      : narrowStatusTable(entries, nowMs, layout.width),
    // Each request class's limits, configured or learned (and when); empty when no set has a class. Narrow: cut to
    // the width like the table (--wide has it whole).
    layout.wide
      ? classesSection(entries, nowMs).trimEnd()
      : classesSection(entries, nowMs)
          .trimEnd()
          .split('\n')
          .map((line) => clip(line, layout.width))
          .join('\n'),
  ];
  return sections.filter((section) => section !== '').join('\n\n');
}
