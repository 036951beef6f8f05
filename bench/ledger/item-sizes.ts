import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
  GetItemCommand,
} from '@aws-sdk/client-dynamodb';
import { dynamoItemSize } from '../../test/support/ledger-harness.js';

/** DynamoDB charges a write by the larger of the item before and after it, in units of this many bytes. */
export const WRITE_UNIT_BYTES = 1024;

export interface ItemSizes {
  /** Write attempts that reached DynamoDB (a refused condition and a lost answer included; throttles not). */
  writes: number;
  /** The largest item measured, before or after any of them. */
  largest: number;
  /** Writes whose item, before or after, was over one write unit. */
  overOneUnit: number;
  /** Write units charged in all (each write: the larger of before and after, rounded up to whole units). */
  units: number;
  /** Of `writes`, those refused by their condition (another process wrote first, or a re-sent copy of an applied write). */
  refused: number;
  /** Of `writes`, the head additions (an ADD to the head slots; the others are full writes). */
  headAdditions: number;
}

type Item = Record<string, AttributeValue>;
const WRITES = new Set(['UpdateItemCommand', 'PutItemCommand', 'DeleteItemCommand']);

/**
 * Measures the item around every write attempt of `client` (the SDK's retries each count) by dynamoItemSize, for
 * a bench whose client writes ONE item. After a write: the item its answer returns (ALL_NEW; ALL_OLD for a
 * refused condition); where the answer has none (a lost answer: the write may have applied; dynalite's refused
 * conditions), the item read back at once through `reader`, a client without faults. Before a write: the last
 * item measured (reads' answers too) when it was sent; with several processes writing at once another write
 * may have fallen between, so a write's own "before" is approximate, and the largest is exact up to an item
 * state that no answer or read ever showed (one a lost answer left, written over before the read back).
 */
export function measureItemSizes(client: DynamoDBClient, reader: DynamoDBClient): () => ItemSizes {
  const sizes: ItemSizes = { writes: 0, largest: 0, overOneUnit: 0, units: 0, refused: 0, headAdditions: 0 };
  let latest = 0;
  const seen = (item: Item | undefined): number => {
    latest = item ? dynamoItemSize(item) : 0;
    sizes.largest = Math.max(sizes.largest, latest);
    return latest;
  };
  const charge = (before: number, after: number) => {
    const larger = Math.max(before, after);
    sizes.writes++;
    sizes.units += Math.max(1, Math.ceil(larger / WRITE_UNIT_BYTES));
    if (larger > WRITE_UNIT_BYTES) sizes.overOneUnit++;
  };
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const command = context.commandName ?? '';
      const input = args.input as { TableName?: string; Key?: Item };
      if (!WRITES.has(command)) {
        const result = await next(args);
        if (command === 'GetItemCommand') seen((result.output as { Item?: Item }).Item);
        return result;
      }
      const before = latest;
      const headAddition = (args.input as { UpdateExpression?: string }).UpdateExpression?.startsWith('ADD ');
      const after = async (item: Item | undefined) =>
        charge(
          before,
          seen(
            item ??
              (
                await reader.send(
                  new GetItemCommand({ TableName: input.TableName, Key: input.Key, ConsistentRead: true }),
                )
              ).Item,
          ),
        );
      try {
        const result = await next(args);
        await after((result.output as { Attributes?: Item }).Attributes);
        if (headAddition) sizes.headAdditions++;
        return result;
      } catch (error) {
        const refused = error instanceof ConditionalCheckFailedException;
        // Throttles and 500s: refused unapplied, not charged.
        if (!refused && (error as Error).name !== 'TimeoutError') throw error;
        await after(refused ? error.Item : undefined);
        if (refused) sizes.refused++;
        if (headAddition) sizes.headAdditions++;
        throw error;
      }
    },
    // Above the deserializer (so answers arrive parsed) and inside the SDK's retries: every attempt.
    { step: 'deserialize', priority: 'high', name: 'measureItemSizes' },
  );
  return () => ({ ...sizes });
}
