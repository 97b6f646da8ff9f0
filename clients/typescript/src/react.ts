// `useAssistant`: one AssistantClient per mounted component and session,
// with the streamed text of the latest exchange as state. Anything more
// (several messages, tool boxes) is the app's own: `client.on` and the
// exchange handle give every event.
import { useEffect, useRef, useState } from "react";

import { AssistantClient, type AssistantClientOptions, type SendOptions } from "./client.js";
import type { FinalResponse } from "./types.js";

export interface AssistantState {
  /** Null until the client is made (first effect). */
  client: AssistantClient | null;
  connected: boolean;
  /** The text streamed so far by the latest exchange. */
  text: string;
  /** Whether an exchange is running. */
  busy: boolean;
  /** The latest exchange's final response. */
  final: FinalResponse | null;
  error: Error | null;
  send: (content: string, options?: SendOptions) => Promise<FinalResponse | null>;
}

/**
 * Connects while mounted (again when `url`, `sessionId` or `token` change);
 * `options.hostContext` is applied (and joined with) whenever its object
 * changes, so keep it in state or `useMemo` rather than a literal.
 */
export function useAssistant(options: AssistantClientOptions): AssistantState {
  const [client, setClient] = useState<AssistantClient | null>(null);
  const [connected, setConnected] = useState(false);
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const [final, setFinal] = useState<FinalResponse | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const latest = useRef(options);
  latest.current = options;

  useEffect(() => {
    const made = new AssistantClient(latest.current);
    const offs = [
      made.on("connect", () => setConnected(true)),
      made.on("disconnect", () => setConnected(false)),
    ];
    setClient(made);
    return () => {
      offs.forEach((off) => off());
      made.close();
      setClient(null);
      setConnected(false);
    };
  }, [options.url, options.sessionId, options.token]);

  useEffect(() => {
    if (client && options.hostContext) client.setHostContext(options.hostContext).catch(() => undefined);
  }, [client, options.hostContext]);

  const send = async (content: string, sendOptions?: SendOptions) => {
    if (!client) return null;
    setText("");
    setBusy(true);
    setError(null);
    try {
      const exchange = client.send(content, sendOptions);
      for await (const event of exchange) {
        if (event.type === "assistant:text_delta") setText((shown) => shown + event.data.content);
      }
      const answer = await exchange.final;
      setFinal(answer);
      return answer;
    } catch (caught) {
      setError(caught as Error);
      return null;
    } finally {
      setBusy(false);
    }
  };

  return { client, connected, text, busy, final, error, send };
}
