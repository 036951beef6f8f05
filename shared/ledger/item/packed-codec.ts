import type { Ring } from '../ring.js';
import { CAP_UNTIL_MS, parseRingKey, ringKey, SLOTS_PER_WINDOW } from '../ring-plan.js';
import type { VendorCap } from '../vendor-caps.js';

/**
 * Item format 2's packed attribute `rb` (limit-plan.ts, ItemFormat): everything a full write replaces, as bytes.
 *
 *   u8 layout (1)
 *   varint n, n × (u8 length, bytes): the scopes of the rings and caps, each name once
 *   varint n, n × ring: varint scope, varint window ms, varint slots per window, varint k, k × older slot
 *     (older slots newest first; a slot is one varint: 0 empty, else (count - 1) * 36 + sub-slot + 1)
 *   varint n, n × cap: varint scope, varint window (0 not known, else seconds × 2, or ms × 2 + 1 for a window of
 *     no whole seconds), varint remaining, varint (until - time) in 10 ms, rounded up (a cap lasts no less)
 *   varint n, n × carried write id (30 bits in 4 bytes)
 *   varint n, n × spent receipt id: zigzag varint (expiry seconds - time seconds), 3 bytes of its random part
 *
 * The rings' order is the item's directory: a ring's head count is the attribute `H<index, base 36>`.
 * Anything that does not parse exactly is refused (the caller fails closed).
 */
export interface PackedState {
  /** By ring key, in directory order: the older slots (index 0 unused: the head lives apart). */
  rings: Map<string, Ring>;
  caps: VendorCap[];
  carriedWriteIds: string[];
  spent: string[];
}

const LAYOUT = 1;

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const EXPIRY_DIGITS = 7;

class Writer {
  readonly #bytes: number[] = [];
  byte(value: number): void {
    this.#bytes.push(value & 0xff);
  }
  varint(value: number): void {
    let rest = value;
    while (rest >= 128) {
      this.byte((rest % 128) | 0x80);
      rest = Math.floor(rest / 128);
    }
    this.byte(rest);
  }
  zigzag(value: number): void {
    this.varint(value >= 0 ? value * 2 : -value * 2 - 1);
  }
  text(value: string): void {
    this.byte(value.length);
    for (const char of value) this.byte(char.charCodeAt(0));
  }
  done(): Uint8Array {
    return Uint8Array.from(this.#bytes);
  }
}

class Reader {
  #at = 0;
  constructor(
    readonly bytes: Uint8Array,
    readonly fail: (what: string) => never,
  ) {}
  byte(): number {
    const value = this.bytes[this.#at++];
    return value === undefined ? this.fail('packed item truncated') : value;
  }
  varint(): number {
    let value = 0;
    for (let scale = 1; ; scale *= 128) {
      const byte = this.byte();
      value += (byte & 0x7f) * scale;
      if (byte < 128) break;
      if (scale > 2 ** 42) this.fail('packed varint too long');
    }
    return value;
  }
  zigzag(): number {
    const value = this.varint();
    return value % 2 === 0 ? value / 2 : -(value + 1) / 2;
  }
  text(): string {
    const length = this.byte();
    let value = '';
    for (let i = 0; i < length; i++) value += String.fromCharCode(this.byte());
    return value;
  }
  /** A count of entries: each takes at least one byte, so more than the bytes left is malformed. */
  count(): number {
    const n = this.varint();
    if (n > this.bytes.length - this.#at) this.fail('packed count');
    return n;
  }
  end(): void {
    if (this.#at !== this.bytes.length) this.fail('packed item has trailing bytes');
  }
}

const b64Value = (text: string): number => {
  let value = 0;
  for (const char of text) value = value * 64 + B64.indexOf(char);
  return value;
};
const b64Text = (value: number, length: number): string => {
  let text = '';
  let rest = value;
  for (let i = 0; i < length; i++) {
    text = (B64[rest % 64] as string) + text;
    rest = Math.floor(rest / 64);
  }
  return text;
};

/** `time`: the item's time (ms): caps and spent ids are stored relative to it. */
export function encodePacked(packed: PackedState, time: number): Uint8Array {
  const out = new Writer();
  out.byte(LAYOUT);
  const scopes = [
    ...new Set([
      ...[...packed.rings.keys()].map((key) => parseRingKey(key).scope),
      ...packed.caps.map((c) => c.scope),
    ]),
  ];
  out.varint(scopes.length);
  for (const scope of scopes) out.text(scope);
  out.varint(packed.rings.size);
  for (const [key, ring] of packed.rings) {
    const { scope, windowMs } = parseRingKey(key);
    out.varint(scopes.indexOf(scope));
    out.varint(windowMs);
    out.varint(slotsOf(key));
    let older = ring.counts.length - 1;
    while (older > 0 && !ring.counts[older]) older--;
    out.varint(Math.max(0, older));
    for (let j = 1; j <= older; j++) {
      const count = ring.counts[j] ?? 0;
      out.varint(count > 0 ? (count - 1) * 36 + (ring.subs[j] ?? 0) + 1 : 0);
    }
  }
  out.varint(packed.caps.length);
  for (const cap of packed.caps) {
    out.varint(scopes.indexOf(cap.scope));
    const w = cap.windowMs;
    out.varint(w === undefined ? 0 : w % 1000 === 0 ? (w / 1000) * 2 : w * 2 + 1);
    out.varint(cap.remaining);
    out.varint(Math.max(0, Math.ceil((cap.until - time) / CAP_UNTIL_MS)));
  }
  out.varint(packed.carriedWriteIds.length);
  for (const id of packed.carriedWriteIds) {
    const value = b64Value(id);
    for (let shift = 3; shift >= 0; shift--) out.byte(Math.floor(value / 256 ** shift));
  }
  out.varint(packed.spent.length);
  const seconds = Math.floor(time / 1000);
  for (const id of packed.spent) {
    out.zigzag(Number.parseInt(id.slice(0, EXPIRY_DIGITS), 36) - seconds);
    const random = b64Value(id.slice(EXPIRY_DIGITS));
    for (let shift = 2; shift >= 0; shift--) out.byte(Math.floor(random / 256 ** shift));
  }
  return out.done();
}

/** The slots per window a ring key names (`.<base 36>`), SLOTS_PER_WINDOW when it names none. */
function slotsOf(key: string): number {
  const dot = key.lastIndexOf('.');
  return dot > key.lastIndexOf('/') ? Number.parseInt(key.slice(dot + 1), 36) : SLOTS_PER_WINDOW;
}

export function decodePacked(bytes: Uint8Array, time: number, fail: (what: string) => never): PackedState {
  const input = new Reader(bytes, fail);
  if (input.byte() !== LAYOUT) fail('packed layout');
  const scopes = Array.from({ length: input.count() }, () => input.text());
  const scope = (): string => scopes[input.varint()] ?? fail('packed scope');
  const rings = new Map<string, Ring>();
  for (let n = input.count(); n > 0; n--) {
    const name = scope();
    const windowMs = input.varint();
    const slots = input.varint();
    if (windowMs < 1 || slots < 1) fail('packed window');
    const key = ringKey(name, windowMs, slots);
    const ring: Ring = { counts: [0], subs: [0] };
    for (let k = input.count(); k > 0; k--) {
      const value = input.varint();
      ring.counts.push(value === 0 ? 0 : Math.floor((value - 1) / 36) + 1);
      ring.subs.push(value === 0 ? 0 : (value - 1) % 36);
    }
    if (rings.has(key)) fail('packed ring twice');
    rings.set(key, ring);
  }
  const caps: VendorCap[] = [];
  for (let n = input.count(); n > 0; n--) {
    const capScope = scope();
    const window = input.varint();
    const remaining = input.varint();
    const cap: VendorCap = { scope: capScope, remaining, until: time + input.varint() * CAP_UNTIL_MS };
    if (window > 0) cap.windowMs = window % 2 === 0 ? (window / 2) * 1000 : (window - 1) / 2;
    caps.push(cap);
  }
  const carriedWriteIds: string[] = [];
  for (let n = input.count(); n > 0; n--) {
    let value = 0;
    for (let i = 0; i < 4; i++) value = value * 256 + input.byte();
    if (value >= 64 ** 5) fail('packed write id');
    carriedWriteIds.push(b64Text(value, 5));
  }
  const spent: string[] = [];
  const seconds = Math.floor(time / 1000);
  for (let n = input.count(); n > 0; n--) {
    const expiry = seconds + input.zigzag();
    let random = 0;
    for (let i = 0; i < 3; i++) random = random * 256 + input.byte();
    if (expiry < 0 || expiry >= 36 ** EXPIRY_DIGITS) fail('packed receipt id');
    spent.push(`${expiry.toString(36).padStart(EXPIRY_DIGITS, '0')}${b64Text(random, 4)}`);
  }
  input.end();
  return { rings, caps, carriedWriteIds, spent };
}
