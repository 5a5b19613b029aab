/** Names the feed-forward layer (lib/layers/feedforward.ts) takes from the raw addon's interface. */
export { FeedForwardActivations } from './ops.generated';
export type { FeedForwardActivation } from './ops.generated';
