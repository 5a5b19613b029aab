/** Names the feed-forward layer (lib/layers/feedforward.ts) takes from the raw addon's interface. */
export type { FeedForwardActivation } from './ops.generated';
