import { vi } from 'vitest';
import { createPowertoolsTelemetry } from '../../shared/observability.js';

/** The dimension names of every metric the real Powertools telemetry writes (EMF on stdout) for one call. */
export function emittedDimensions(
  emit: (telemetry: ReturnType<typeof createPowertoolsTelemetry>) => void,
): string[][] {
  const lines: string[] = [];
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    lines.push(String(chunk));
    return true;
  });
  emit(createPowertoolsTelemetry());
  vi.restoreAllMocks();
  return lines
    .flatMap((line) => line.split('\n'))
    .filter((line) => line.includes('"_aws"'))
    .flatMap(
      (line) =>
        (JSON.parse(line) as { _aws: { CloudWatchMetrics: { Dimensions: string[][] }[] } })._aws
          .CloudWatchMetrics,
    )
    .flatMap((m) => m.Dimensions.map((set) => [...set].sort()));
}
