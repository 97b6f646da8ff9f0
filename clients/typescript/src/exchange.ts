import type { AssistantEvent, ErrorEvent, FinalResponse, MessageAck } from "./types.js";

/** A request the server refused (the ack's error), or a lost exchange. */
export class AssistantError extends Error {
  /** The server's `assistant:error` payload, when it sent one. */
  readonly event: ErrorEvent | null;

  constructor(message: string, event: ErrorEvent | null = null) {
    super(message);
    this.name = "AssistantError";
    this.event = event;
  }
}

/**
 * One exchange: a message and everything it leads to, continuations
 * included, until a final response with no action pending. Iterate it for
 * the events as they come (they are buffered from the start, so a late
 * iterator misses nothing; one iterator per exchange); await `final` for the
 * last final response. A turn that failed or was cancelled still resolves
 * `final` (with `error: true`); `final` rejects only when the server refused
 * the message or the client was closed.
 */
export class ExchangeHandle implements AsyncIterable<AssistantEvent> {
  /** The client's id of the message that opened the exchange. */
  readonly id: string;
  /** The session the exchange runs on. */
  readonly sessionId: string;
  /** Resolves to the last final response once no action is pending. */
  readonly final: Promise<FinalResponse>;
  /**
   * The server's ack of the opening message: `ok: true` once it is accepted
   * (`accepted_as`, `message_id`), `ok: false` with the error when refused.
   */
  readonly accepted: Promise<MessageAck>;
  /** @internal */
  acknowledge!: (ack: MessageAck) => void;

  private readonly events: AssistantEvent[] = [];
  private wake: (() => void) | null = null;
  private ended = false;
  private failure: AssistantError | null = null;
  private lastFinal: FinalResponse | null = null;
  private resolveFinal!: (final: FinalResponse) => void;
  private rejectFinal!: (error: AssistantError) => void;

  constructor(id: string, sessionId: string) {
    this.id = id;
    this.sessionId = sessionId;
    this.final = new Promise((resolve, reject) => {
      this.resolveFinal = resolve;
      this.rejectFinal = reject;
    });
    // A caller that only iterates must not see an unhandled rejection.
    this.final.catch(() => undefined);
    this.accepted = new Promise((resolve) => {
      this.acknowledge = resolve;
    });
  }

  /** Whether the exchange is over. */
  get done(): boolean {
    return this.ended;
  }

  /** The newest final response so far (one per turn of the exchange). */
  get latestFinal(): FinalResponse | null {
    return this.lastFinal;
  }

  /** @internal */
  push(event: AssistantEvent): void {
    if (this.ended) return;
    if (event.type === "assistant:final_response") this.lastFinal = event.data;
    this.events.push(event);
    this.notify();
  }

  /** @internal Ends the exchange with its last final response. */
  finish(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.lastFinal) {
      this.resolveFinal(this.lastFinal);
    } else {
      this.failure = new AssistantError("the exchange ended without a final response");
      this.rejectFinal(this.failure);
    }
    this.notify();
  }

  /** @internal Ends the exchange with an error. */
  fail(error: AssistantError): void {
    if (this.ended) return;
    this.ended = true;
    this.failure = error;
    this.rejectFinal(error);
    this.notify();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<AssistantEvent> {
    let next = 0;
    for (;;) {
      if (next < this.events.length) {
        yield this.events[next++];
        continue;
      }
      if (this.ended) {
        if (this.failure) throw this.failure;
        return;
      }
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
    }
  }
}
