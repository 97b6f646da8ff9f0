import { io, type ManagerOptions, type Socket, type SocketOptions } from "socket.io-client";

import { AssistantError, ExchangeHandle } from "./exchange.js";
import type {
  AssistantEvent,
  Attachment,
  CancelAck,
  ErrorEvent,
  FinalResponse,
  HostAction,
  HostContext,
  JoinAck,
  Json,
  JsonObject,
  MessageAck,
  MessageBody,
  PendingToolCall,
  RequestConfig,
  ServerEventName,
  ServerEvents,
} from "./types.js";

export interface AssistantClientOptions {
  /** The server's origin (`https://example.com`); omitted in a browser, the page's own. */
  url?: string;
  /** The conversation; sent in the handshake query (`session_id`) so a proxy can route by it. */
  sessionId: string;
  /** `ACCESS__LOCAL_TOKEN` or a JWT, sent as the CONNECT packet's `auth.token`. */
  token?: string;
  /** The context sent with every message (and when joining). */
  hostContext?: HostContext;
  /** Passed to `socket.io-client` (e.g. `transports`, `reconnectionDelay`). */
  socketOptions?: Partial<ManagerOptions & SocketOptions>;
}

export interface SendOptions {
  attachments?: Attachment[];
  /** This message's context instead of the client's (registered actions are still added). */
  hostContext?: HostContext;
  config?: RequestConfig;
  /** Branch from this message. */
  parentId?: string;
  /** The message id; a fresh one by default. */
  id?: string;
}

export interface DecideOptions extends SendOptions {
  /**
   * The session of the decision: a fresh one per decision is the protocol's
   * advice (docs/protocol.md, Silent decisions). Default: the client's.
   */
  sessionId?: string;
}

export interface ActionSpec {
  /** What it does, for the model. */
  description: string;
  /** A JSON Schema of type `object`. */
  parameters?: JsonObject;
}

/** Performs a host action; its return value is the continuation's `tool_result`. */
export type ActionHandler = (args: any, call: PendingToolCall) => unknown | Promise<unknown>;

type Listener<Name extends ServerEventName> = (data: ServerEvents[Name]) => void;

/** A message on its way to the server: an exchange's opening message, or the continuation that answers a host call. */
interface Outgoing {
  body: MessageBody;
  opening: boolean;
  /** How many times it was emitted (again after a reconnect). */
  sent: number;
  /** The server took it (ack ok, or a 409 saying it already has it). */
  delivered: boolean;
}

let counter = 0;
function newId(prefix: string): string {
  const random = Math.random().toString(36).slice(2, 10);
  return `${prefix}-${Date.now().toString(36)}-${(counter++).toString(36)}-${random}`;
}

/** A continuation the server already holds: never sent again, never run again. */
function alreadyRecorded(error: ErrorEvent): boolean {
  return error.type === "session_error" && /already (recorded|exists)/.test(error.message);
}

function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return typeof error === "string" ? error : JSON.stringify(error);
}

/**
 * A client of the `/assistant` Socket.IO namespace for one session.
 *
 * Reconnect: `socket.io-client` reconnects by itself; on every connect the
 * client joins the session again with its current context. A host call is
 * remembered by its `call_id` with the continuation that answers it, so its
 * handler runs at most once per client. A message (opening or continuation)
 * not acknowledged before the connection dropped is sent again (same message
 * id) after the reconnect, and a 409 saying the result is "already recorded"
 * or the message id "already exists" counts as delivered; the session is
 * then read over HTTP until that turn is over, to answer the call it waits for.
 */
export class AssistantClient {
  readonly socket: Socket;
  readonly sessionId: string;

  /** The token the socket connects with (and a resync reads the session with). */
  readonly token: string | undefined;

  private readonly url: string;

  private context: HostContext | undefined;
  private readonly actions = new Map<string, { spec: HostAction; handler: ActionHandler }>();
  private readonly answers = new Map<string, Outgoing>();
  private readonly running = new Map<string, Promise<Outgoing>>();
  /** Exchanges in the order their events come; events go to the first. */
  private readonly exchanges: Exchange[] = [];
  private readonly listeners = new Map<string, Set<(data: any) => void>>();
  private closed = false;

  constructor(options: AssistantClientOptions) {
    this.sessionId = options.sessionId;
    this.url = options.url ? options.url.replace(/\/+$/, "") : "";
    this.token = options.token;
    this.context = options.hostContext;
    this.socket = io(this.url + "/assistant", {
      ...options.socketOptions,
      query: { ...(options.socketOptions?.query as object), session_id: options.sessionId },
      auth: options.token === undefined ? undefined : { token: options.token },
    });
    this.socket.on("connect", () => this.onConnect());
    this.socket.onAny((name: string, data: unknown) => this.dispatch(name, data));
  }

  /** Whether the socket is connected now. */
  get connected(): boolean {
    return this.socket.connected;
  }

  /** The context sent with messages: the one set, plus the registered actions. */
  get hostContext(): HostContext | undefined {
    return this.withActions(this.context);
  }

  /** Replaces the context sent with every message and joins with it. */
  setHostContext(context: HostContext | undefined): Promise<JoinAck> {
    this.context = context;
    return this.join();
  }

  /**
   * Registers a host action: it is offered to the model in
   * `host_context.actions`, and when a turn stops at it, `handler(args)` runs
   * and its value is sent back as the continuation (a throw or rejection as
   * `tool_outcome: "failed"` with the error's message). Returns a function
   * that unregisters it.
   */
  registerAction(name: string, spec: ActionSpec, handler: ActionHandler): () => void {
    const action: HostAction = {
      name,
      description: spec.description,
      parameters: spec.parameters ?? { type: "object", properties: {} },
    };
    this.actions.set(name, { spec: action, handler });
    return () => {
      if (this.actions.get(name)?.handler === handler) this.actions.delete(name);
    };
  }

  /** Sends a message; the handle streams the whole exchange, continuations included. */
  send(content: string, options: SendOptions = {}): ExchangeHandle {
    return this.start(content, options, this.sessionId, "text");
  }

  /**
   * A silent decision (`output_mode: "host_tools"`): the model only picks one
   * registered action or `hold`. A picked action's handler runs and its result
   * is sent as the receipt, so `final` resolves to the receipt's final
   * response (`decision: "completed"`), or to `decision: "hold"`.
   */
  decide(content: string, options: DecideOptions = {}): ExchangeHandle {
    return this.start(content, options, options.sessionId ?? this.sessionId, "host_tools");
  }

  /** Adds a remark to the live turn (ack `accepted_as: "steering"`), or starts a turn when none is live. */
  async steer(content: string): Promise<MessageAck> {
    const body: MessageBody = {
      id: newId("steer"),
      session_id: this.sessionId,
      content,
      message_type: "steering",
    };
    return (await this.socket.emitWithAck("assistant_message", body)) as MessageAck;
  }

  /** Cancels the live turn; its exchange ends with a final response of `error_type: "cancelled"`. */
  async cancel(): Promise<CancelAck> {
    return (await this.socket.emitWithAck("assistant_cancel", {
      session_id: this.sessionId,
    })) as CancelAck;
  }

  /** Listens to one server event (`assistant:text_delta`, ...) for any exchange; returns the unsubscribe. */
  on<Name extends ServerEventName>(name: Name, listener: Listener<Name>): () => void;
  /** Socket lifecycle: `connect`, `disconnect`, `connect_error`. */
  on(name: "connect" | "disconnect" | "connect_error", listener: (data: any) => void): () => void;
  on(name: string, listener: (data: any) => void): () => void {
    if (name === "connect" || name === "disconnect" || name === "connect_error") {
      this.socket.on(name, listener);
      return () => {
        this.socket.off(name, listener);
      };
    }
    let set = this.listeners.get(name);
    if (!set) {
      set = new Set();
      this.listeners.set(name, set);
    }
    set.add(listener);
    return () => {
      set?.delete(listener);
    };
  }

  /** Disconnects for good; exchanges still open fail. */
  close(): void {
    this.closed = true;
    this.socket.close();
    for (const exchange of this.exchanges.splice(0)) {
      exchange.handle.fail(new AssistantError("the client was closed"));
    }
  }

  /** Joins the session with the current context. */
  async join(): Promise<JoinAck> {
    const body: { session_id: string; host_context?: HostContext } = { session_id: this.sessionId };
    const context = this.hostContext;
    if (context) body.host_context = context;
    return (await this.socket.emitWithAck("assistant_join_session", body)) as JoinAck;
  }

  // ---- internals -----------------------------------------------------------

  private withActions(context: HostContext | undefined): HostContext | undefined {
    if (this.actions.size === 0) return context;
    const registered = [...this.actions.values()].map((action) => action.spec);
    const own = (context?.actions ?? []).filter((action) => !this.actions.has(action.name));
    return { ...(context ?? { version: 1 }), actions: [...own, ...registered] };
  }

  private onConnect(): void {
    this.join().catch(() => undefined);
    // Messages not sent yet, or that the old connection may have lost.
    for (const exchange of this.exchanges) {
      if (exchange.waiting && !exchange.waiting.delivered) {
        this.deliver(exchange, exchange.waiting);
      }
    }
  }

  private start(
    content: string,
    options: SendOptions,
    sessionId: string,
    mode: "text" | "host_tools",
  ): ExchangeHandle {
    const body: MessageBody = { id: options.id ?? newId("m"), session_id: sessionId, content };
    const context = this.withActions(options.hostContext ?? this.context);
    if (context) body.host_context = context;
    if (options.attachments) body.attachments = options.attachments;
    if (options.config) body.config = options.config;
    if (options.parentId) body.parent_id = options.parentId;
    if (mode === "host_tools") body.output_mode = "host_tools";
    const opening: Outgoing = { body, opening: true, sent: 0, delivered: false };
    const exchange: Exchange = {
      handle: new ExchangeHandle(body.id, sessionId),
      afterFinal: "none",
      waiting: opening,
      requestIds: new Set(),
      messageIds: new Set(),
    };
    // A new message supersedes an exchange that waits on its own host
    // handler (the server resolves that call as superseded): it ends there.
    for (const earlier of this.exchanges.filter((e) => e.afterFinal === "handling" && e.handle.sessionId === sessionId)) {
      this.end(earlier);
    }
    this.exchanges.push(exchange);
    this.deliver(exchange, opening);
    return exchange.handle;
  }

  private dispatch(name: string, data: any): void {
    for (const listener of this.listeners.get(name) ?? []) listener(data);
    if (!name.startsWith("assistant:") || !data || typeof data !== "object") return;
    // A refused request (validation, session_error, ...) is its ack's answer,
    // not an event of the exchange that happens to be open.
    if (name === "assistant:error" && data.type !== "error") return;
    const exchange = this.ownerOf(data);
    if (!exchange) return;
    exchange.handle.push({ type: name, data } as AssistantEvent);
    if (name === "assistant:final_response") {
      const final = data as FinalResponse;
      const call = final.error ? null : final.pending_tool_call;
      exchange.afterFinal = call ? "handling" : "ending";
      if (call) this.answer(exchange, call);
    } else if (name === "assistant:status" && data.status === "started") {
      exchange.afterFinal = "none";
    } else if (name === "assistant:status" && data.status === "completed") {
      if (exchange.afterFinal === "ending") this.end(exchange);
    }
  }

  /**
   * The exchange an event belongs to. The socket is in its session's room,
   * so it also gets the turns other tabs, HTTP or background work started:
   * those go to listeners only. This socket's own turns are known by the
   * acks of its messages: `status` and `error` events carry the request id
   * of the message that caused them (a room's never do), the others the
   * assistant message id the ack named (in `segment_id` or `message_id`).
   */
  private ownerOf(data: any): Exchange | undefined {
    const ofSession = this.exchanges.filter((e) => e.handle.sessionId === data.session_id);
    if (typeof data.request_id === "string") return ofSession.find((e) => e.requestIds.has(data.request_id));
    const messageId = eventMessageId(data);
    return messageId === null ? undefined : ofSession.find((e) => e.messageIds.has(messageId));
  }

  /** Runs the handler of a host call (once per call id) and sends its continuation. */
  private answer(exchange: Exchange, call: PendingToolCall): void {
    let answer = this.running.get(call.call_id);
    if (!answer) {
      answer = this.perform(exchange.handle.sessionId, call);
      this.running.set(call.call_id, answer);
    }
    answer.then((done) => {
      if (exchange.handle.done) return;
      exchange.waiting = done;
      if (!done.delivered) this.deliver(exchange, done);
    });
  }

  private async perform(sessionId: string, call: PendingToolCall): Promise<Outgoing> {
    const known = this.answers.get(call.call_id);
    if (known) return known;
    const body: MessageBody = {
      id: newId("r"),
      session_id: sessionId,
      content: "",
      tool_call_id: call.call_id,
    };
    const action = this.actions.get(call.tool_name);
    if (!action) {
      body.tool_result = {
        error: `no handler for host action "${call.tool_name}" is registered in this client`,
      };
      body.tool_outcome = "failed";
    } else {
      try {
        const value = await action.handler(call.arguments, call);
        body.tool_result = value === undefined ? null : (value as Json);
      } catch (error) {
        body.tool_result = { error: errorMessage(error) };
        body.tool_outcome = "failed";
      }
    }
    const answer: Outgoing = { body, opening: false, sent: 0, delivered: false };
    this.answers.set(call.call_id, answer);
    return answer;
  }

  /**
   * Sends a message; while disconnected, `onConnect` sends it (again). A
   * 409 "already recorded" / "already exists" means the server has it: for a
   * continuation always (another connection or tab answered the call), for
   * an opening message only when it is sent again after a reconnect (the
   * first time, a duplicate id is the caller's mistake).
   */
  private deliver(exchange: Exchange, outgoing: Outgoing): void {
    if (!this.socket.connected || this.closed) return;
    outgoing.sent += 1;
    // An ack callback, not `emitWithAck`: it runs as the ack packet is read,
    // before the turn's first event (a promise would settle after events
    // that came in the same transport payload), so the ids are known in time.
    this.socket.emit("assistant_message", outgoing.body, (ack: MessageAck) => {
      if (ack.ok) {
        if (ack.request_id) exchange.requestIds.add(ack.request_id);
        if (ack.message_id) exchange.messageIds.add(ack.message_id);
      }
      if (outgoing.delivered || exchange.handle.done) return;
      const recorded = !ack.ok && alreadyRecorded(ack.error) && (!outgoing.opening || outgoing.sent > 1);
      if (ack.ok || recorded) {
        outgoing.delivered = true;
        if (exchange.waiting === outgoing) exchange.waiting = null;
        // Accepted through a connection that dropped: the 409 is the server's word that it has it.
        if (outgoing.opening) exchange.handle.acknowledge(ack.ok ? ack : { ok: true, accepted_as: "turn", message_id: null });
        if (recorded) this.resync(exchange);
        return;
      }
      if (outgoing.opening) exchange.handle.acknowledge(ack);
      this.end(exchange, new AssistantError(ack.error.message, ack.error));
    });
  }

  /**
   * A message was recorded through a connection that dropped, and its
   * turn's events went with it. Reads the session (`GET /api/sessions/{id}`)
   * until that turn is over: a host call it now waits for (the next queued
   * one) is answered and the exchange goes on; otherwise the exchange ends
   * at its latest final response.
   */
  private async resync(exchange: Exchange): Promise<void> {
    const sessionId = exchange.handle.sessionId;
    for (let attempt = 0; attempt < RESYNC_ATTEMPTS && !this.closed; attempt++) {
      const info = await this.readSession(sessionId).catch(() => null);
      if (!info) break;
      if (info.turn_running) {
        await new Promise((resolve) => setTimeout(resolve, RESYNC_INTERVAL_MS));
        continue;
      }
      const next = info.pending_action;
      // Already being answered: the turn's events reached this socket
      // through the session's room, and its handler runs.
      if (next && this.running.has(next.tool_call_id)) return;
      if (next) {
        exchange.afterFinal = "handling";
        this.answer(exchange, {
          tool_name: next.tool_name,
          call_id: next.tool_call_id,
          arguments: next.arguments,
          queued: next.queued,
        });
        return;
      }
      break;
    }
    this.end(exchange);
  }

  private async readSession(sessionId: string): Promise<SessionInfo | null> {
    const headers: Record<string, string> = {};
    if (this.token !== undefined) headers.authorization = `Bearer ${this.token}`;
    const response = await fetch(`${this.url}/api/sessions/${encodeURIComponent(sessionId)}`, { headers });
    return response.ok ? ((await response.json()) as SessionInfo) : null;
  }

  private end(exchange: Exchange, error?: AssistantError): void {
    const index = this.exchanges.indexOf(exchange);
    if (index >= 0) this.exchanges.splice(index, 1);
    if (error) exchange.handle.fail(error);
    else exchange.handle.finish();
  }
}

/** How often, and how many times, a resync reads a session whose turn still runs. */
const RESYNC_INTERVAL_MS = 250;
const RESYNC_ATTEMPTS = 480;

/** The part of `GET /api/sessions/{id}` a resync reads. */
interface SessionInfo {
  turn_running: boolean;
  pending_action: {
    tool_call_id: string;
    tool_name: string;
    arguments: Json;
    queued: string[];
  } | null;
}

interface Exchange {
  handle: ExchangeHandle;
  /**
   * After the latest final response: `handling` a host call, `ending` at the
   * next `status: completed`, or `none` (a turn is streaming).
   */
  afterFinal: "none" | "handling" | "ending";
  /** The message being delivered (opening or continuation), until the server has it. */
  waiting: Outgoing | null;
  /** The request ids of its messages' acks: its `status` and `error` events carry one. */
  requestIds: Set<string>;
  /** The assistant messages its acks named: its other events carry one. */
  messageIds: Set<string>;
}

/** The assistant message an event is about: `<message id>:<index>` of a segment, or `message_id`. */
function eventMessageId(data: any): string | null {
  // A steering note's `message_id` is the steering message's; its segment is the turn's.
  if (typeof data.segment_id === "string") {
    const colon = data.segment_id.lastIndexOf(":");
    return colon > 0 ? data.segment_id.slice(0, colon) : null;
  }
  return typeof data.message_id === "string" ? data.message_id : null;
}
