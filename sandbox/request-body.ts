import type { IncomingMessage } from 'node:http';

/** The vendor's payload limit is "not shown"; 64 KiB is far above any login or test resource. */
export const MAX_BODY_BYTES = 64 * 1024;
/** Past this the sender is abusive: stop draining and drop the connection. */
const MAX_DRAIN_BYTES = 8 * 1024 * 1024;

export type BodyResult = { kind: 'ok'; text: string } | { kind: 'too-large' } | { kind: 'failed' };

/**
 * Reads the whole body, keeping at most MAX_BODY_BYTES. An oversize body is still drained (up to a
 * bound) so the client gets its 413 answer instead of a reset connection. Never rejects.
 */
export function readBody(req: IncomingMessage): Promise<BodyResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      else if (size > MAX_DRAIN_BYTES) {
        req.destroy();
        resolve({ kind: 'failed' });
      }
    });
    req.on('end', () => {
      resolve(
        size > MAX_BODY_BYTES
          ? { kind: 'too-large' }
          : { kind: 'ok', text: Buffer.concat(chunks).toString('utf8') },
      );
    });
    req.on('error', () => resolve({ kind: 'failed' }));
    req.on('close', () => resolve({ kind: 'failed' }));
  });
}
