/**
 * The soak's progress lines with the time left of the whole `npm run soak` (about 11 minutes by default): each
 * soak run's own line (runSoak's ticker), then how long the planned parts still take. A part's consumers run for
 * its planned seconds from its start, so the time left is what remains of the current part plus the parts not
 * yet started (the broker's start and the report add a few seconds to each).
 */
export class SoakProgress {
  private part = -1;
  private partStartedAt = 0;

  constructor(
    /** Each part's planned seconds, in the order they run. */
    private readonly partsSeconds: readonly number[],
    private readonly write: (line: string) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** The next part starts now. */
  startPart(): void {
    this.part++;
    this.partStartedAt = this.now();
  }

  /** Seconds left of the planned parts. */
  secondsLeft(): number {
    const current = this.partsSeconds[this.part] ?? 0;
    const ofCurrent = this.part < 0 ? 0 : Math.max(0, current - (this.now() - this.partStartedAt) / 1000);
    const later = this.partsSeconds.slice(this.part + 1).reduce((sum, seconds) => sum + seconds, 0);
    return ofCurrent + later;
  }

  /** runSoak's progress callback: its line, and the time left of all the parts. */
  readonly line = (text: string): void => {
    const total = this.partsSeconds.reduce((sum, seconds) => sum + seconds, 0);
    this.write(`  ${text} · about ${minutes(this.secondsLeft())} left of ${minutes(total)}\n`);
  };
}

function minutes(seconds: number): string {
  const whole = Math.round(seconds);
  return `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, '0')} s`;
}
