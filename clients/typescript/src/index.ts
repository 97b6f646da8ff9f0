export { AssistantClient } from "./client.js";
export type {
  ActionHandler,
  ActionSpec,
  AssistantClientOptions,
  DecideOptions,
  SendOptions,
} from "./client.js";
export { AssistantError, ExchangeHandle } from "./exchange.js";
export type * from "./types.js";
