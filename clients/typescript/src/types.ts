// The wire types of assistant-runtime's host contract (docs/protocol.md).
// test/types.test.mjs holds them to the server's OpenAPI document and to its
// validation: a field added on one side and not the other fails the test.

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A JSON object. */
export type JsonObject = { [key: string]: Json };

/**
 * An image, document or text for the model. Exactly one of `data_uri`, `url`,
 * `text` gives the content.
 */
export interface Attachment {
  /** `image` (default), `document` or `text`. */
  kind?: "image" | "document" | "text";
  /**
   * `reference` (default): the model receives it, and it is stored with its
   * message. `screenshot`: never stored; the model sees it only through the
   * `look_at_screen` tool on turns that carry one.
   */
  purpose?: "reference" | "screenshot";
  /** Up to 128 characters. */
  name?: string;
  /** Up to 512 characters. */
  description?: string;
  /** Up to 64 characters. */
  media_type?: string;
  /** A data URI, up to 12,000,000 characters. */
  data_uri?: string;
  /** Up to 2,048 characters. */
  url?: string;
  /** Only with `kind: "text"`; up to 12,000,000 characters. */
  text?: string;
}

/** Who the host is: shown to the model, trusted for nothing. */
export interface HostInfo {
  /** 1–64 characters; required when `host` is given. */
  name: string;
  kind?: "browser" | "mobile" | "desktop" | "terminal" | "service" | "other";
  /** Up to 32 characters. */
  version?: string;
}

/** What is on screen. `view.data`, `view.state` and `extensions` together hold at most 32,000 characters of JSON. */
export interface HostView {
  /** Up to 128 characters; also picks the backend tools of `TOOLS__PAGE_SCOPES`. */
  name: string;
  description?: string;
  /** Curated content; an object. */
  data?: JsonObject;
  /** Selection, filters; an object. */
  state?: JsonObject;
}

/** A place the host can go. At most 50 per context. */
export interface NavigationTarget {
  /** Up to 128 characters. */
  name: string;
  description?: string;
  /** Up to 512 characters. */
  route?: string;
}

/** A host action the model may call. At most 32 per context. */
export interface HostAction {
  /** `^[A-Za-z0-9_-]{1,64}$`. */
  name: string;
  /** What it does, for the model. */
  description: string;
  /** A JSON Schema of type `object` (the runtime's bounded subset, docs/protocol.md). */
  parameters?: JsonObject;
}

/** Something off screen, by name. */
export interface BackgroundEntry {
  state?: string;
  summary?: Json;
}

/**
 * What the host tells the model about itself for a turn: application
 * context, never identity. Unknown fields are refused at every level.
 */
export interface HostContext {
  /** Must be 1. */
  version: 1;
  host?: HostInfo;
  view?: HostView;
  /** At most 50. */
  navigation?: NavigationTarget[];
  /** At most 32. Registered actions (`registerAction`) are added to these. */
  actions?: HostAction[];
  /** At most 16, like the message's. */
  attachments?: Attachment[];
  /** `{"name": {"state", "summary"}}`. */
  background?: { [name: string]: BackgroundEntry };
  /** When the host captured it; shown as given. */
  captured_at?: string;
  /** Anything host-specific; counts towards the 32,000 characters of `view.data` + `view.state`. */
  extensions?: JsonObject;
}

/** Per-request overrides. */
export interface RequestConfig {
  /** `provider:name`. */
  default_model?: string;
  thinking_budget?: number;
  temperature?: number;
  /** Can only lower the server's. */
  max_turns?: number;
}

/** The body of `assistant_message` (and of `POST /api/chat`). */
export interface MessageBody {
  /** 1..64 characters; unique within the session. */
  id: string;
  /** 1..64 characters; the session is created on first use. */
  session_id: string;
  /** The user's text; may be empty on a continuation. */
  content?: string;
  /** Branch from this message; omitted, the turn follows the active leaf. */
  parent_id?: string;
  message_type?: "standard" | "steering";
  output_mode?: "text" | "host_tools";
  host_context?: HostContext;
  /** At most 16. */
  attachments?: Attachment[];
  /** Legacy screenshot data URIs. */
  images?: string[];
  /** One screenshot data URI. */
  screenshot?: string;
  config?: RequestConfig;
  /** Continuation: the `call_id` being answered. */
  tool_call_id?: string;
  /** Continuation: what the action returned. */
  tool_result?: Json;
  /** Continuation: `failed` when the host could not perform it. */
  tool_outcome?: "success" | "failed";
}

export interface Usage {
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  requests: number;
  tool_calls: number;
  /** Null when the model has no known price. */
  cost_usd: number | null;
  /** Model calls made for the turn but not by it (summarizing), by name. */
  auxiliary?: { [name: string]: Usage };
}

/** The host action the turn stopped at. */
export interface PendingToolCall {
  tool_name: string;
  call_id: string;
  arguments: Json;
  /** Call ids handed over after this one, in order. */
  queued: string[];
}

/** The end of a turn: `assistant:final_response`. */
export interface FinalResponse {
  /** Null in `host_tools` mode. */
  content: string | null;
  model: string;
  streamed: boolean;
  session_id: string;
  turn_number: number;
  /** The assistant message the turn wrote. */
  message_id: string;
  usage: Usage;
  pending_tool_call: PendingToolCall | null;
  /** Silent decisions only. */
  decision: "hold" | "pending" | "completed" | null;
  error?: boolean;
  error_type?: string;
  error_message?: string;
}

export interface StatusEvent {
  status: "started" | "completed";
  session_id: string;
  /** The id the server logged the request under (quote it when reporting a problem). */
  request_id?: string;
}

export interface DeltaEvent {
  session_id: string;
  content: string;
  /** `<message_id>:<segment_index>`. */
  segment_id: string;
  segment_index: number;
  delta_index: number;
  segment_started: boolean;
  segment_kind: "text" | "thinking";
}

export interface ToolCallEvent {
  session_id: string;
  /** The assistant message the call belongs to. */
  message_id: string;
  tool_name: string;
  arguments: Json;
  call_id: string;
  category: "backend" | "host";
  segment_index: number;
}

export interface ToolResultEvent {
  session_id: string;
  message_id: string;
  tool_name: string;
  output: Json;
  call_id: string;
  duration_ms: number;
  invalidates?: string[];
}

export interface ToolErrorEvent {
  session_id: string;
  message_id: string;
  tool_name: string;
  call_id: string;
  error: string;
  segment_index: number;
}

export interface SteeringDeliveredEvent {
  session_id: string;
  /** The steering message's own id. */
  message_id: string;
  content: string;
  segment_id: string;
  segment_index: number;
  segment_kind: "steering";
}

export interface ContextDeliveredEvent {
  session_id: string;
  segment_id: string;
  segment_index: number;
  segment_kind: "host_context";
}

/** `assistant:error`: a refused request, or a failed turn after its final response. */
export interface ErrorEvent {
  session_id?: string;
  /** `validation`, `session_error`, `forbidden`, `rate_limited` or `error`. */
  type: string;
  message: string;
  error_type: string;
  terminal: boolean;
  retry_allowed: boolean;
  retry_after?: number;
  request_id?: string;
}

/** Every server event, by its name on the socket. */
export interface ServerEvents {
  "assistant:status": StatusEvent;
  "assistant:thinking_delta": DeltaEvent;
  "assistant:text_delta": DeltaEvent;
  "assistant:tool_call": ToolCallEvent;
  "assistant:tool_result": ToolResultEvent;
  "assistant:tool_error": ToolErrorEvent;
  "assistant:steering_delivered": SteeringDeliveredEvent;
  "assistant:context_delivered": ContextDeliveredEvent;
  "assistant:final_response": FinalResponse;
  "assistant:error": ErrorEvent;
}

export type ServerEventName = keyof ServerEvents;

/** One event of an exchange, tagged with its name. */
export type AssistantEvent = {
  [Name in ServerEventName]: { type: Name; data: ServerEvents[Name] };
}[ServerEventName];

/** The ack of `assistant_message`. */
export type MessageAck =
  | { ok: true; accepted_as: "turn" | "steering"; message_id: string | null; request_id?: string }
  | { ok: false; error: ErrorEvent; request_id?: string };

/** The ack of `assistant_cancel`. */
export type CancelAck =
  | { ok: true; cancel_requested: boolean; request_id?: string }
  | { ok: false; error: ErrorEvent; request_id?: string };

/** The ack of `assistant_join_session`. */
export type JoinAck =
  | { ok: true; session_id: string; request_id?: string }
  | { ok: false; error: ErrorEvent; request_id?: string };
